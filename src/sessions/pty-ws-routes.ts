/**
 * The session WebSocket routes on the HTTP listener (pass them as `wsRoutes` to
 * startHttpListener), all speaking pty-ws.v1 as published (binding/README.md):
 *
 *   /api/v1/sessions/{session_id}/pty                        subprotocol pty-ws.v1.binary or
 *   /agents/{instance_id}/sessions/{session_id}/attach       pty-ws.v1 (required; 400 otherwise);
 *                                                            the client sends pty.join_session
 *   /ws/sessions/{session_id}/orchestrate?role=…&replay_from=…  no subprotocol, JSON frames;
 *                                                            joined at open with the query's role
 *                                                            (default observer) and cursor
 *
 * An unknown session is refused at the upgrade with a 404 `session.not_found` envelope (a bad
 * role or cursor: 400). On the agent-scoped URL a session id that is a fresh UUID on a connected
 * agent is accepted as a session to start: binding_hello reports it with current_sequence 0 and
 * the agent's session_host, and a pty.join_session carrying session_backend starts it (spec 4.2).
 *
 * A text frame that does not decode gets Error INVALID_REQUEST (or UNSUPPORTED_OPERATION for an
 * op sandboxd does not serve) with the frame's id: a malformed envelope closes that connection
 * (4400), an unsupported op does not. The A2A core ops go to `deps.a2a` when it is given
 * (binding/a2a.ts; README "A2A"), and are unsupported otherwise.
 */
import { SvcError } from '../core/errors.js';
import type { RequestView } from '../http/types.js';
import type { WsConn, WsRouteOptions } from '../http/ws-route.js';
import { decodeA2aRequest, isA2aServedOp, type A2aBindingHandler } from './binding/a2a.js';
import { decodeBinaryInput } from './binding/binary.js';
import { CLOSE_CODES, LIMITS, SUBPROTOCOL_BINARY, SUBPROTOCOL_JSON } from './binding/codes.js';
import { decodeClientFrame } from './binding/decode.js';
import { pongFrame, toText } from './binding/encode.js';
import type { ClientFrame } from './binding/frames.js';
import { bindingDialect, type BindingParams } from './binding-dialect.js';
import type { JoinRequest, SessionHub } from './session-hub.js';
import { AGENT_ATTACH_WS_PATH, ORCHESTRATE_WS_PATH, PTY_WS_PATH, type SessionRole } from './session-types.js';

/** Most preferred first: a client offering the binary subprotocol gets it. */
export const PTY_WS_PROTOCOLS = [SUBPROTOCOL_BINARY, SUBPROTOCOL_JSON] as const;

export interface SessionWsRoutesDeps {
  /** The hub of a live session. */
  hub(sessionId: string): SessionHub | undefined;
  /**
   * The hub behind an agent-scoped URL: the agent's live session, or (create=true) a pending hub
   * for a fresh UUID on a connected agent (undefined instead when create=false). Throws SvcError
   * (404 agent or session not found).
   */
  agentHub(instanceId: string, sessionId: string, create: boolean): SessionHub | undefined;
  readonly params: BindingParams;
  /** Resolves once the session's (or the agent-scoped URL's) host is probed, so binding_hello's session_host is the real one. */
  hostReady?(instanceId: string | undefined, sessionId: string): Promise<void>;
  /** Serves the A2A core ops (binding/a2a.ts); absent: they are answered UNSUPPORTED_OPERATION. */
  a2a?: A2aBindingHandler;
  /** uWS idle timeout; default 120 s (above the hub's own ping and pong timeout, so the hub decides first). */
  idleTimeoutSeconds?: number;
}

type HubOf = (conn: WsConn) => SessionHub | undefined;

function sessionIdOf(req: RequestView): string {
  return req.params['session_id'] ?? '';
}

function requireHub(deps: SessionWsRoutesDeps, req: RequestView): void {
  const id = sessionIdOf(req);
  const hub = deps.hub(id);
  if (hub === undefined || hub.closed || hub.pending)
    throw new SvcError('session.not_found', `no live session ${JSON.stringify(id.slice(0, 128))}`);
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
    if (!/^\d{1,15}$/.test(cursors[0])) throw new SvcError('request.invalid', 'replay_from must be a non-negative integer');
    replayFrom = Number(cursors[0]);
  }
  return { role, replayFrom };
}

/** A decoded pty.join_session as the hub's typed join. */
export function joinRequestOf(f: Extract<ClientFrame, { op: 'pty.join_session' }>): JoinRequest {
  const p = f.payload;
  return {
    role: p.role,
    clientLabel: p.client_label,
    replayFrom: f.replay_from,
    cols: p.terminal_size?.cols ?? p.cols,
    rows: p.terminal_size?.rows ?? p.rows,
    sessionBackend: p.session_backend,
    sessionClass: p.session_class,
    argv: p.argv,
    command: p.command,
    cwd: p.cwd,
    env: p.env,
  };
}

/** Dispatches one decoded client frame to the hub. */
function dispatch(hub: SessionHub, conn: WsConn, f: ClientFrame, input: Uint8Array | undefined): void {
  switch (f.op) {
    case 'pty.join_session':
      return hub.join(conn, joinRequestOf(f), f.id);
    case 'pty.session_input':
      return hub.input(conn, input ?? new Uint8Array(0), f.id);
    case 'pty.session_resize':
      return hub.resize(conn, f.payload.cols, f.payload.rows, f.id);
    case 'pty.request_role':
      return hub.requestRole(conn, f.payload.role, f.id);
    case 'pty.request_keyframe':
      return hub.requestKeyframe(conn, f.id);
    case 'pty.leave_session':
      return hub.leave(conn, f.id);
    case 'ping':
      return hub.reply(conn, toText(pongFrame(f.id, f.payload.client_ts)));
    case 'pong':
      return hub.alive(conn);
  }
}

/**
 * An A2A core op (binding/a2a.ts) to the A2A handler: true when the frame was one of the ops it
 * serves (answered, or refused INVALID_REQUEST for its payload), false for any other op.
 */
function toA2a(a2a: A2aBindingHandler, hub: SessionHub, conn: WsConn, data: ArrayBuffer, id: string): boolean {
  // decodeClientFrame parsed it already: it is one JSON object with a valid envelope.
  const raw = JSON.parse(Buffer.from(data).toString('utf8')) as Record<string, unknown>;
  if (!isA2aServedOp(raw['op'])) return false;
  const req = decodeA2aRequest(raw);
  if (typeof req === 'string') {
    hub.refuse(conn, 'INVALID_REQUEST', req, id);
    return true;
  }
  a2a.handle(
    {
      connId: conn.id,
      sessionId: sessionIdOf(conn.request),
      instanceId: conn.request.params['instance_id'],
      agentId: hub.agentId,
      send: (build) => hub.replyAt(conn, (position) => JSON.stringify(build(position))),
      error: (code, message, requestId) => hub.refuse(conn, code, message, requestId),
    },
    req,
  );
  return true;
}

function handlers(deps: SessionWsRoutesDeps, hubOf: HubOf, implicitJoin: boolean): WsRouteOptions['handlers'] {
  return {
    open(conn) {
      let hub: SessionHub | undefined;
      try {
        hub = hubOf(conn);
      } catch {
        hub = undefined;
      }
      if (hub === undefined) return conn.close(CLOSE_CODES.notFound, 'no such session');
      hub.open(conn, bindingDialect(conn.protocol === SUBPROTOCOL_BINARY, deps.params));
      if (!implicitJoin) return;
      const q = parseOrchestrateQuery(conn.request.query);
      hub.join(conn, { role: q.role, exactRole: true, replayFrom: q.replayFrom });
    },
    message(conn, data, isBinary) {
      const hub = hubOf(conn);
      if (hub === undefined) return conn.close(CLOSE_CODES.notFound, 'no such session');
      if (isBinary) {
        if (conn.protocol !== SUBPROTOCOL_BINARY)
          return hub.refuse(
            conn,
            'INVALID_REQUEST',
            `binary messages need the ${SUBPROTOCOL_BINARY} subprotocol`,
            undefined,
            CLOSE_CODES.protocolError,
          );
        const r = decodeBinaryInput(new Uint8Array(data));
        if (!r.ok) return hub.refuse(conn, 'INVALID_REQUEST', r.message, undefined, CLOSE_CODES.protocolError);
        return hub.input(conn, r.value);
      }
      const r = decodeClientFrame(new Uint8Array(data));
      if (r.ok) return dispatch(hub, conn, r.frame, r.input);
      if (r.code === 'UNSUPPORTED_OPERATION' && r.id !== undefined && deps.a2a !== undefined && toA2a(deps.a2a, hub, conn, data, r.id))
        return;
      if (r.code === 'UNSUPPORTED_OPERATION') return hub.refuse(conn, r.code, r.message, r.id);
      hub.refuse(conn, r.code, r.message, r.id, CLOSE_CODES.protocolError);
    },
    close(conn) {
      deps.a2a?.closed(conn.id);
      hubOf(conn)?.disconnect(conn);
    },
  };
}

/** The pty-ws.v1 routes (session URL, agent-scoped URL) and the orchestrate route. */
export function sessionWsRoutes(deps: SessionWsRoutesDeps): WsRouteOptions[] {
  const common = { maxPayloadBytes: LIMITS.maxClientFrameBytes, idleTimeoutSeconds: deps.idleTimeoutSeconds ?? 120 };
  const bySession: HubOf = (conn) => deps.hub(sessionIdOf(conn.request));
  // Connections of the agent-scoped URL remember their hub: a pending one is not yet in deps.hub.
  const attached = new WeakMap<WsConn, SessionHub>();
  const byAgent: HubOf = (conn) => {
    const known = attached.get(conn);
    if (known !== undefined) return known;
    const hub = deps.agentHub(conn.request.params['instance_id'] ?? '', sessionIdOf(conn.request), true);
    if (hub !== undefined) attached.set(conn, hub);
    return hub;
  };
  return [
    {
      ...common,
      path: PTY_WS_PATH,
      protocols: PTY_WS_PROTOCOLS,
      authorize: async (req) => {
        requireHub(deps, req);
        await deps.hostReady?.(undefined, sessionIdOf(req));
      },
      handlers: handlers(deps, bySession, false),
    },
    {
      ...common,
      path: AGENT_ATTACH_WS_PATH,
      protocols: PTY_WS_PROTOCOLS,
      authorize: async (req) => {
        const instanceId = req.params['instance_id'] ?? '';
        deps.agentHub(instanceId, sessionIdOf(req), false);
        await deps.hostReady?.(instanceId, sessionIdOf(req));
      },
      handlers: handlers(deps, byAgent, false),
    },
    {
      ...common,
      path: ORCHESTRATE_WS_PATH,
      authorize: async (req) => {
        parseOrchestrateQuery(req.query);
        requireHub(deps, req);
        await deps.hostReady?.(undefined, sessionIdOf(req));
      },
      handlers: handlers(deps, bySession, true),
    },
  ];
}
