/**
 * pty-ws.v1: the frames of the session WebSocket (spec 4.2 "pty-ws/v1 binding", subprotocol
 * `pty-ws.v1`). Paths: `/api/v1/sessions/{session_id}/pty` (explicit join) and
 * `/ws/sessions/{session_id}/orchestrate?role=…` (same frames, implicit join at open).
 *
 * Every frame is a JSON text frame with an `op` field, except two optional binary fast paths.
 * Unknown fields are refused (strict), so a typo fails loudly instead of being ignored.
 *
 * Server → client
 *   binding_hello        first frame: {binding:"pty-ws.v1", version:1, session:{session_id,
 *                        current_seq, state, terminal_size:{cols,rows}}, session_host:{backends:[
 *                        {session_backend, session_class, supported, reason?}], observe_supported,
 *                        drive_supported, reattach_supported}, supported_operations:[op…],
 *                        limits:{max_input_bytes, ping_interval_ms, pong_timeout_ms,
 *                        max_queued_bytes, replay_bytes}}
 *   pty.role_assigned    answer to a join or role request: {session_id, client_id, role,
 *                        requested_role, reason? ("lease_held": downgraded; "released"),
 *                        current_seq, terminal_size}. Clients must use `role`.
 *   pty.replay           before replayed output: {from_seq, to_seq, reset}. reset=true: clear
 *                        the screen first (no cursor, or output between the cursor and from_seq
 *                        is gone). Output frames with from_seq ≤ seq ≤ to_seq follow, then live.
 *   pty.output           {seq, data} (data = base64 of raw PTY bytes; seq strictly increasing).
 *                        With binary_output: binary frame "PW1O" + seq (u64 BE) + raw bytes.
 *   pty.resize           the PTY's size changed: {cols, rows}.
 *   pty.membership       {controllers:[client_id], observers:[…], attachment_count}.
 *   pty.session_status   {state (starting|running|detached), agent_connected}.
 *   pty.left             answer to pty.leave_session; the server then closes with 1000.
 *   pty.closed           the session ended: {exit_code (null when unknown), reason}; close 1000.
 *   error                {code, message, fatal}; fatal → the server closes (codes below).
 *   ping / pong          {id?}: the server pings every ping_interval_ms; any client frame counts
 *                        as life, and a client silent for pong_timeout_ms is closed (4408).
 *
 * Client → server
 *   pty.join_session     {role? (default observer), session_backend?, session_class?, argv?,
 *                        cwd?, env?, terminal_size? {cols, rows}, replay_from? (first seq wanted;
 *                        omitted: everything retained, with reset), binary_output?, client_label?}
 *                        Once per connection. Backend/class other than tmux/managed fail closed
 *                        (error unsupported_selection, close 4501) before anything starts.
 *                        argv/cwd/env are used only when this join (re)starts the session's PTY.
 *   pty.session_input    {data: base64} ≤ max_input_bytes decoded; controller only. Binary fast
 *                        path: "PW1I" + raw bytes.
 *   pty.session_resize   {cols, rows} (1..1000 each); controller only.
 *   pty.request_role     {role}: observer → controller (granted only if the lease is free),
 *                        controller → observer (releases the lease).
 *   pty.leave_session    {}.
 *   ping / pong          {id?} (string ≤ 64 or integer); ping is answered with pong.
 *
 * Close codes: 1000 left or session closed; 1001 server stopping; 4400 malformed or invalid
 * frame (that client only); 4404 no such session; 4408 pong timeout; 4413 slow consumer (its
 * queue passed max_queued_bytes; rejoin with replay_from); 4501 unsupported selection.
 *
 * The encoders are in pty-ws-frames.ts.
 */
import type { SessionRole } from './session-types.js';

export const PTY_WS_BINDING = 'pty-ws.v1';
export const PTY_WS_VERSION = 1;
/** Largest decoded input of one frame. */
export const kMaxInputBytes = 64 * 1024;
/** Largest text frame we accept (64 KiB of input is ~87 KiB of base64 JSON). */
export const kMaxClientFrameBytes = 128 * 1024;
export const kMaxTerminalDim = 1000;

export const CloseCode = {
  normal: 1000,
  goingAway: 1001,
  protocolError: 4400,
  sessionNotFound: 4404,
  pongTimeout: 4408,
  slowConsumer: 4413,
  unsupportedSelection: 4501,
} as const;

export type FrameErrorCode =
  | 'malformed_frame'
  | 'unknown_op'
  | 'invalid_field'
  | 'frame_too_large'
  | 'not_joined'
  | 'already_joined'
  | 'input_not_permitted'
  | 'unsupported_selection'
  | 'session_closed'
  | 'slow_consumer'
  | 'ping_timeout'
  | 'agent_unavailable';

export const CLIENT_OPS = [
  'pty.join_session',
  'pty.session_input',
  'pty.session_resize',
  'pty.request_role',
  'pty.leave_session',
  'ping',
  'pong',
] as const;

export interface TerminalSize {
  readonly cols: number;
  readonly rows: number;
}

export interface JoinFrame {
  readonly op: 'pty.join_session';
  readonly role: SessionRole | undefined;
  readonly sessionBackend: string | undefined;
  readonly sessionClass: string | undefined;
  readonly argv: readonly string[] | undefined;
  readonly cwd: string | undefined;
  readonly env: Readonly<Record<string, string>> | undefined;
  readonly terminalSize: TerminalSize | undefined;
  readonly replayFrom: number | undefined;
  readonly binaryOutput: boolean;
  readonly clientLabel: string | undefined;
}

export type ClientFrame =
  | JoinFrame
  | { readonly op: 'pty.session_input'; readonly data: Uint8Array }
  | { readonly op: 'pty.session_resize'; readonly cols: number; readonly rows: number }
  | { readonly op: 'pty.request_role'; readonly role: SessionRole }
  | { readonly op: 'pty.leave_session' }
  | { readonly op: 'ping' | 'pong'; readonly id: string | number | undefined };

export type DecodeResult =
  { readonly ok: true; readonly frame: ClientFrame } | { readonly ok: false; readonly code: FrameErrorCode; readonly message: string };

/** "PW1I": first bytes of a binary input frame. */
export const MAGIC_INPUT: readonly number[] = [0x50, 0x57, 0x31, 0x49];
/** "PW1O": first bytes of a binary output frame. */
export const MAGIC_OUTPUT: readonly number[] = [0x50, 0x57, 0x31, 0x4f];
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const FIELDS: Record<(typeof CLIENT_OPS)[number], ReadonlySet<string>> = {
  'pty.join_session': new Set([
    'op',
    'role',
    'session_backend',
    'session_class',
    'argv',
    'cwd',
    'env',
    'terminal_size',
    'replay_from',
    'binary_output',
    'client_label',
  ]),
  'pty.session_input': new Set(['op', 'data']),
  'pty.session_resize': new Set(['op', 'cols', 'rows']),
  'pty.request_role': new Set(['op', 'role']),
  'pty.leave_session': new Set(['op']),
  ping: new Set(['op', 'id']),
  pong: new Set(['op', 'id']),
};

class FieldError extends Error {}

function fail(message: string): never {
  throw new FieldError(message);
}

/** Decodes one client frame. Never throws: a bad frame gives {ok:false, code, message}. */
export function decodeClientFrame(data: ArrayBuffer | Uint8Array, isBinary: boolean): DecodeResult {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  if (bytes.byteLength > kMaxClientFrameBytes)
    return { ok: false, code: 'frame_too_large', message: `frames are limited to ${kMaxClientFrameBytes} bytes` };
  if (isBinary) {
    if (bytes.byteLength < 4 || MAGIC_INPUT.some((b, i) => bytes[i] !== b))
      return { ok: false, code: 'malformed_frame', message: 'binary frames must start with PW1I (input)' };
    if (bytes.byteLength - 4 > kMaxInputBytes)
      return { ok: false, code: 'frame_too_large', message: `input is limited to ${kMaxInputBytes} bytes per frame` };
    return { ok: true, frame: { op: 'pty.session_input', data: bytes.slice(4) } };
  }
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    return { ok: false, code: 'malformed_frame', message: 'text frames must be UTF-8 JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { ok: false, code: 'malformed_frame', message: 'a frame is a JSON object' };
  const o = value as Record<string, unknown>;
  const op = o['op'];
  if (typeof op !== 'string' || !Object.hasOwn(FIELDS, op)) {
    return {
      ok: false,
      code: 'unknown_op',
      message: `unknown op ${typeof op === 'string' ? JSON.stringify(op.slice(0, 64)) : '(missing)'}; ops: ${CLIENT_OPS.join(', ')}`,
    };
  }
  const allowed = FIELDS[op as keyof typeof FIELDS];
  const extra = Object.keys(o).find((k) => !allowed.has(k));
  if (extra !== undefined)
    return { ok: false, code: 'invalid_field', message: `${op}: unknown field ${JSON.stringify(extra.slice(0, 64))}` };
  try {
    return { ok: true, frame: decodeOp(op as keyof typeof FIELDS, o) };
  } catch (err) {
    if (err instanceof FieldError) return { ok: false, code: 'invalid_field', message: `${op}: ${err.message}` };
    throw err;
  }
}

function decodeOp(op: keyof typeof FIELDS, o: Record<string, unknown>): ClientFrame {
  switch (op) {
    case 'pty.join_session':
      return {
        op,
        role: o['role'] === undefined ? undefined : role(o['role']),
        sessionBackend: optString(o['session_backend'], 'session_backend', 32),
        sessionClass: optString(o['session_class'], 'session_class', 32),
        argv: o['argv'] === undefined ? undefined : argv(o['argv']),
        cwd: o['cwd'] === undefined ? undefined : cwd(o['cwd']),
        env: o['env'] === undefined ? undefined : env(o['env']),
        terminalSize: o['terminal_size'] === undefined ? undefined : size(o['terminal_size']),
        replayFrom: o['replay_from'] === undefined ? undefined : count(o['replay_from'], 'replay_from'),
        binaryOutput: o['binary_output'] === undefined ? false : bool(o['binary_output'], 'binary_output'),
        clientLabel: optString(o['client_label'], 'client_label', 128),
      };
    case 'pty.session_input':
      return { op, data: base64(o['data']) };
    case 'pty.session_resize':
      return { op, cols: dim(o['cols'], 'cols'), rows: dim(o['rows'], 'rows') };
    case 'pty.request_role':
      return { op, role: role(o['role']) };
    case 'pty.leave_session':
      return { op };
    case 'ping':
    case 'pong':
      return { op, id: pingId(o['id']) };
  }
}

function role(v: unknown): SessionRole {
  if (v === 'controller' || v === 'observer') return v;
  return fail('role must be "controller" or "observer"');
}

function optString(v: unknown, name: string, maxChars: number): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length > maxChars) return fail(`${name} must be a string of at most ${maxChars} characters`);
  return v;
}

function bool(v: unknown, name: string): boolean {
  if (typeof v !== 'boolean') return fail(`${name} must be a boolean`);
  return v;
}

function count(v: unknown, name: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) return fail(`${name} must be a non-negative integer`);
  return v;
}

function dim(v: unknown, name: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > kMaxTerminalDim)
    return fail(`${name} must be an integer 1..${kMaxTerminalDim}`);
  return v;
}

function size(v: unknown): TerminalSize {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail('terminal_size must be an object {cols, rows}');
  const o = v as Record<string, unknown>;
  if (Object.keys(o).some((k) => k !== 'cols' && k !== 'rows')) return fail('terminal_size takes only cols and rows');
  return { cols: dim(o['cols'], 'cols'), rows: dim(o['rows'], 'rows') };
}

function noNul(s: string, name: string): string {
  if (s.includes('\0')) return fail(`${name} must not contain NUL`);
  return s;
}

function argv(v: unknown): string[] {
  if (!Array.isArray(v) || v.length < 1 || v.length > 256) return fail('argv must be an array of 1..256 strings');
  return v.map((a, i) =>
    typeof a === 'string' && a.length <= 4096 ? noNul(a, `argv[${i}]`) : fail(`argv[${i}] must be a string of at most 4096 characters`),
  );
}

function cwd(v: unknown): string {
  if (typeof v !== 'string' || !v.startsWith('/') || v.length > 4096)
    return fail('cwd must be an absolute path of at most 4096 characters');
  return noNul(v, 'cwd');
}

function env(v: unknown): Record<string, string> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail('env must be an object of strings');
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > 64) return fail('env takes at most 64 variables');
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, val] of entries) {
    if (!ENV_NAME.test(k)) return fail(`env name ${JSON.stringify(k.slice(0, 64))} is not a shell identifier`);
    if (typeof val !== 'string' || val.length > 4096) return fail(`env ${k} must be a string of at most 4096 characters`);
    out[k] = noNul(val, `env ${k}`);
  }
  return out;
}

function base64(v: unknown): Uint8Array {
  if (typeof v !== 'string' || v.length > Math.ceil(kMaxInputBytes / 3) * 4)
    return fail(`data must be base64 of at most ${kMaxInputBytes} bytes`);
  if (!BASE64.test(v)) return fail('data is not canonical base64');
  return new Uint8Array(Buffer.from(v, 'base64'));
}

function pingId(v: unknown): string | number | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'string' && v.length <= 64) return v;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  return fail('id must be a string of at most 64 characters or an integer');
}
