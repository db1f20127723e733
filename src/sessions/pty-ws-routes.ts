/**
 * The two session WebSocket routes on the HTTP listener (pass them as `wsRoutes` to
 * startHttpListener):
 *
 *   /api/v1/sessions/{session_id}/pty                         subprotocol pty-ws.v1 (required);
 *                                                             the client sends pty.join_session
 *   /ws/sessions/{session_id}/orchestrate?role=…&replay_from=…  no subprotocol; joined at open
 *                                                             with the query's role (default
 *                                                             observer) and cursor
 *
 * Both speak the frames of pty-ws-protocol.ts. An unknown session is refused at the upgrade with
 * a 404 `session.not_found` envelope (a bad role or cursor: 400); a session that ends between
 * upgrade and open gets error session_closed and close 4404. A frame that does not decode closes
 * that connection only (error frame, then 4400).
 */
import { SvcError } from '../core/errors.js';
import type { RequestView } from '../http/types.js';
import type { WsConn, WsRouteOptions } from '../http/ws-route.js';
import { encodeError } from './pty-ws-frames.js';
import { CloseCode, decodeClientFrame, kMaxClientFrameBytes, type JoinFrame } from './pty-ws-protocol.js';
import type { SessionHub } from './session-hub.js';
import { ORCHESTRATE_WS_PATH, PTY_WS_PATH, PTY_WS_SUBPROTOCOL, type SessionRole } from './session-types.js';

export interface SessionWsRoutesDeps {
  /** The hub of a live session. */
  hub(sessionId: string): SessionHub | undefined;
  /** uWS idle timeout; default 120 s (above the 90 s pong timeout, so the hub decides first). */
  idleTimeoutSeconds?: number;
}

function sessionIdOf(req: RequestView): string {
  return req.params['session_id'] ?? '';
}

function requireHub(deps: SessionWsRoutesDeps, req: RequestView): void {
  const id = sessionIdOf(req);
  if (deps.hub(id)?.closed !== false) throw new SvcError('session.not_found', `no live session ${JSON.stringify(id.slice(0, 128))}`);
}

/** role and replay_from of an orchestrate URL; throws 400 request.invalid. */
export function parseOrchestrateQuery(query: URLSearchParams): { role: SessionRole; replayFrom: number | undefined } {
  const roles = query.getAll('role');
  if (roles.length > 1) throw new SvcError('request.invalid', 'role given more than once');
  const role = roles[0] ?? 'observer';
  if (role !== 'observer' && role !== 'controller') throw new SvcError('request.invalid', 'role must be observer or controller');
  const cursors = query.getAll('replay_from');
  if (cursors.length > 1) throw new SvcError('request.invalid', 'replay_from given more than once');
  let replayFrom: number | undefined;
  if (cursors[0] !== undefined) {
    if (!/^\d{1,16}$/.test(cursors[0])) throw new SvcError('request.invalid', 'replay_from must be a non-negative integer');
    replayFrom = Number(cursors[0]);
  }
  return { role, replayFrom };
}

function handlers(deps: SessionWsRoutesDeps, implicitJoin: boolean): WsRouteOptions['handlers'] {
  const hubOf = (conn: WsConn): SessionHub | undefined => deps.hub(sessionIdOf(conn.request));
  return {
    open(conn) {
      const hub = hubOf(conn);
      if (hub === undefined) {
        conn.send(encodeError('session_closed', 'the session has ended', true));
        conn.close(CloseCode.sessionNotFound, 'no such session');
        return;
      }
      hub.open(conn);
      if (!implicitJoin) return;
      const q = parseOrchestrateQuery(conn.request.query);
      const join: JoinFrame = {
        op: 'pty.join_session',
        role: q.role,
        sessionBackend: undefined,
        sessionClass: undefined,
        argv: undefined,
        cwd: undefined,
        env: undefined,
        terminalSize: undefined,
        replayFrom: q.replayFrom,
        binaryOutput: false,
        clientLabel: undefined,
      };
      hub.handle(conn, join);
    },
    message(conn, data, isBinary) {
      const hub = hubOf(conn);
      if (hub === undefined) return conn.close(CloseCode.sessionNotFound, 'no such session');
      const r = decodeClientFrame(data, isBinary);
      if (r.ok) hub.handle(conn, r.frame);
      else hub.protocolError(conn, r.code, r.message);
    },
    close(conn) {
      hubOf(conn)?.disconnect(conn);
    },
  };
}

/** The pty-ws.v1 route and the orchestrate route. */
export function sessionWsRoutes(deps: SessionWsRoutesDeps): WsRouteOptions[] {
  const common = { maxPayloadBytes: kMaxClientFrameBytes, idleTimeoutSeconds: deps.idleTimeoutSeconds ?? 120 };
  return [
    {
      ...common,
      path: PTY_WS_PATH,
      protocols: [PTY_WS_SUBPROTOCOL],
      authorize: (req) => requireHub(deps, req),
      handlers: handlers(deps, false),
    },
    {
      ...common,
      path: ORCHESTRATE_WS_PATH,
      authorize: (req) => {
        parseOrchestrateQuery(req.query);
        requireHub(deps, req);
      },
      handlers: handlers(deps, true),
    },
  ];
}
