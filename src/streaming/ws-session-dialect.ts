/**
 * The dashboard WebSocket's session dialect (src/sessions/session-dialect.ts): what a connection
 * of the WS listener attached to a session is sent, in the shapes the reference dashboard reads
 * (README "Compatibility with the reference dashboard"). One attachment speaks one of two forms:
 *
 * - `frames` (attached by `join_session`): the session stream as
 *   `{type:"session_frame", session_id, seq, ts, kind, …}` with `ts` in Unix ms and kinds
 *   `output` {stream, data}, `keyframe` {stream, data} (data: base64 of the bytes; a keyframe's
 *   bytes clear the screen and redraw it), `resize` {cols, rows}, `membership_changed`
 *   {controllers, observers: client ids}, `role_assigned` {role}, `closed` {exit_code, reason}
 *   and `error` {code, message}. The join is answered `{type:"session_joined", session_id, role,
 *   current_seq}`.
 * - `legacy` (attached by `attach_session`, `start_shell` or `create_session`): output as the
 *   reference's untagged-stream message `{type:"output", agent_id, command_id, stream, data, ts}`
 *   whose `data` is text (the bytes as UTF-8, invalid sequences replaced, as the reference does),
 *   and the join's keyframe the same way; the request's own reply comes from `firstRole`.
 *   `closed` and `error` still go as `session_frame`s.
 *
 * Both forms: a refused request or fatal problem is `{type:"error", code, message, session_id}`
 * (the reference shows `message`). Cadence keyframes are not sent (the reference draws every
 * keyframe it gets; the output before it was drawn already); neither are hello, status or goodbye,
 * which the reference has no message for.
 */
import type { RoleInfo, SessionDialect, SessionEvent } from '../sessions/session-dialect.js';

export type WsSessionForm = 'frames' | 'legacy';

/** The names a session goes by in the reference's messages (the command id changes on a re-attach). */
export interface WsSessionIds {
  readonly sessionId: string;
  readonly agentId: string;
  readonly commandId: string;
  readonly sessionName: string;
}

export interface WsSessionDialectOptions {
  readonly form: WsSessionForm;
  /** The session's current names. */
  readonly ids: () => WsSessionIds;
  /** Every role decision for this attachment (the join's, then each role request's), before it is encoded. */
  readonly onRole: (r: RoleInfo) => void;
  /** legacy: the reply to the request that attached (session_attached, shell_started, session_created). */
  readonly firstRole?: (r: RoleInfo) => Record<string, unknown>;
}

/** Home, clear screen and SGR reset: a keyframe written to a live terminal replaces what it shows. */
const kClearScreen = Buffer.from('\x1b[0m\x1b[H\x1b[2J', 'latin1');

const tsOf = (e: { readonly ts: string }): number => Date.parse(e.ts);
const base64 = (data: Uint8Array): string => Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');
const text = (data: Uint8Array): string => new TextDecoder().decode(data);

function sessionFrame(sessionId: string, seq: number, ts: number, kind: string, fields: Record<string, unknown>): string {
  return JSON.stringify({ type: 'session_frame', session_id: sessionId, seq, ts, kind, ...fields });
}

function keyframeBytes(snapshot: Uint8Array): Uint8Array {
  const out = new Uint8Array(kClearScreen.byteLength + snapshot.byteLength);
  out.set(kClearScreen, 0);
  out.set(snapshot, kClearScreen.byteLength);
  return out;
}

/** A broadcast session event in `form`; undefined where the form shows nothing. */
function encodeEvent(form: WsSessionForm, ids: WsSessionIds, e: SessionEvent): string | undefined {
  const frame = (kind: string, fields: Record<string, unknown>): string => sessionFrame(ids.sessionId, e.sequence, tsOf(e), kind, fields);
  switch (e.kind) {
    case 'Output':
      if (form === 'legacy') {
        return JSON.stringify({
          type: 'output',
          agent_id: ids.agentId,
          command_id: ids.commandId,
          stream: e.stream,
          data: text(e.data),
          ts: tsOf(e),
        });
      }
      return frame('output', { stream: e.stream, data: base64(e.data) });
    case 'Resize':
      return form === 'frames' ? frame('resize', { cols: e.cols, rows: e.rows }) : undefined;
    case 'MembershipChanged':
      return form === 'frames'
        ? frame('membership_changed', {
            controllers: e.controllers.map((c) => c.client_id),
            observers: e.observers.map((c) => c.client_id),
          })
        : undefined;
    case 'Keyframe':
      return undefined;
    case 'Closed':
      return frame('closed', { exit_code: e.exitCode, reason: e.reason, ...(e.detail !== undefined && { detail: e.detail }) });
    case 'Error':
      return frame('error', { code: e.code, message: e.message });
  }
}

/** The dialect of one attachment (a connection's view of one session). */
export function wsSessionDialect(o: WsSessionDialectOptions): SessionDialect {
  let roles = 0;
  return {
    key: `reference-dashboard.${o.form}`,
    hello: () => undefined,
    event: (e) => encodeEvent(o.form, o.ids(), e),
    role(r, position) {
      o.onRole(r);
      const ids = o.ids();
      if (roles++ === 0) {
        if (o.form === 'legacy') return o.firstRole === undefined ? undefined : JSON.stringify(o.firstRole(r));
        return JSON.stringify({ type: 'session_joined', session_id: ids.sessionId, role: r.role, current_seq: position });
      }
      return o.form === 'frames' ? sessionFrame(ids.sessionId, position, Date.now(), 'role_assigned', { role: r.role }) : undefined;
    },
    keyframe(e, position) {
      const ids = o.ids();
      const bytes = keyframeBytes(e.snapshot);
      if (o.form === 'legacy') {
        return JSON.stringify({
          type: 'output',
          agent_id: ids.agentId,
          command_id: ids.commandId,
          stream: 'stdout',
          data: text(bytes),
          ts: tsOf(e),
        });
      }
      return sessionFrame(ids.sessionId, position, tsOf(e), 'keyframe', { stream: 'stdout', data: base64(bytes) });
    },
    error: (code, message) => JSON.stringify({ type: 'error', code, message, session_id: o.ids().sessionId }),
    status: () => undefined,
    goodbye: () => undefined,
  };
}
