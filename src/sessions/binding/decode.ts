/**
 * decodeClientFrame: one client text frame of pty-ws.v1, validated strictly (the same rules as
 * pty-ws-v1.schema.json's ClientFrame, written out by hand so the server needs no schema engine).
 *
 * - Not JSON, not one object, no string `op`, a malformed envelope or payload: INVALID_REQUEST.
 * - A well-formed op that sandboxd does not serve (the A2A core ops, push-notification config,
 *   any unknown name): UNSUPPORTED_OPERATION, as the binding says for unknown ops.
 * - An op only servers send (binding_hello, pty.session_frame, Error, …): INVALID_REQUEST.
 * - `sequence` from a client is refused; `ts` must be RFC 3339 and is never used for ordering;
 *   `replay_from` is accepted on pty.join_session only; unknown fields anywhere are refused.
 *
 * A failure carries the frame's `id` when it had a usable one, so the Error frame can echo it.
 */
import { Buffer } from 'node:buffer';
import {
  A2A_CLIENT_OPS,
  LIMITS,
  PTY_CLIENT_OPS,
  ROLES,
  SERVER_ONLY_OPS,
  SESSION_BACKENDS,
  SESSION_CLASSES,
  type ErrorCode,
  type Role,
} from './codes.js';
import type { ClientFrame, JoinSessionPayload, TerminalSize } from './frames.js';
import { CLIENT_ID_RE, decodeBase64, isRfc3339 } from './values.js';

export type DecodeErrorCode = Extract<ErrorCode, 'INVALID_REQUEST' | 'UNSUPPORTED_OPERATION'>;

export type DecodeResult =
  | {
      ok: true;
      frame: ClientFrame;
      /** The decoded bytes of a pty.session_input. */
      input?: Buffer;
    }
  | { ok: false; code: DecodeErrorCode; message: string; id?: string };

const ENVELOPE_KEYS = new Set(['op', 'id', 'ts', 'sequence', 'replay_from', 'service_parameters', 'extensions', 'payload']);
/** A syntactically plausible op name: worth an UNSUPPORTED_OPERATION answer rather than INVALID_REQUEST. */
const OP_NAME = /^[A-Za-z][A-Za-z0-9_]*(?:[./][A-Za-z][A-Za-z0-9_]*)*$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const ptyOps: ReadonlySet<string> = new Set(PTY_CLIENT_OPS);
const a2aOps: ReadonlySet<string> = new Set(A2A_CLIENT_OPS);
const serverOps: ReadonlySet<string> = new Set(SERVER_ONLY_OPS);

class Invalid extends Error {}

function fail(message: string): never {
  throw new Invalid(message);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function onlyKeys(o: Record<string, unknown>, allowed: readonly string[], where: string): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) fail(`${where}: unknown field ${JSON.stringify(k)}`);
}

function int(v: unknown, min: number, max: number, where: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) fail(`${where} must be an integer in ${min}..${max}`);
  return v;
}

function str(v: unknown, min: number, max: number, where: string, noNul = false): string {
  if (typeof v !== 'string' || v.length < min || v.length > max) fail(`${where} must be a string of ${min}..${max} characters`);
  if (noNul && v.includes('\0')) fail(`${where} must not contain NUL`);
  return v;
}

function oneOf<T extends string>(v: unknown, values: readonly T[], where: string): T {
  if (typeof v !== 'string' || !(values as readonly string[]).includes(v)) fail(`${where} must be one of ${values.join(', ')}`);
  return v as T;
}

function dim(v: unknown, where: string): number {
  return int(v, 1, LIMITS.maxTerminalDim, where);
}

function size(v: unknown, where: string): TerminalSize {
  if (!isRecord(v)) fail(`${where} must be an object`);
  onlyKeys(v, ['cols', 'rows'], where);
  return { cols: dim(v.cols, `${where}.cols`), rows: dim(v.rows, `${where}.rows`) };
}

function emptyPayload(p: unknown, op: string): Record<string, never> {
  if (p === null) return {};
  if (!isRecord(p)) fail(`${op}: payload must be an object`);
  onlyKeys(p, [], `${op} payload`);
  return {};
}

function joinPayload(p: Record<string, unknown>): JoinSessionPayload {
  const w = 'pty.join_session payload';
  onlyKeys(
    p,
    ['role', 'cols', 'rows', 'client_label', 'session_backend', 'session_class', 'argv', 'command', 'cwd', 'env', 'terminal_size'],
    w,
  );
  const out: JoinSessionPayload = { role: oneOf<Role>(p.role, ROLES, `${w}.role`) };
  if (p.cols !== undefined) out.cols = dim(p.cols, `${w}.cols`);
  if (p.rows !== undefined) out.rows = dim(p.rows, `${w}.rows`);
  if (p.client_label !== undefined) out.client_label = str(p.client_label, 0, LIMITS.maxLabelChars, `${w}.client_label`);
  if (p.session_backend !== undefined) out.session_backend = oneOf(p.session_backend, SESSION_BACKENDS, `${w}.session_backend`);
  if (p.session_class !== undefined) out.session_class = oneOf(p.session_class, SESSION_CLASSES, `${w}.session_class`);
  if (p.argv !== undefined && p.command !== undefined) fail(`${w}: argv and command are exclusive`);
  if (p.argv !== undefined) {
    if (!Array.isArray(p.argv) || p.argv.length < 1 || p.argv.length > LIMITS.maxArgs)
      fail(`${w}.argv must be 1..${LIMITS.maxArgs} strings`);
    out.argv = p.argv.map((a, i) => str(a, i === 0 ? 1 : 0, LIMITS.maxArgChars, `${w}.argv[${i}]`, true));
  }
  if (p.command !== undefined) out.command = str(p.command, 1, LIMITS.maxCommandChars, `${w}.command`, true);
  if (p.cwd !== undefined) out.cwd = str(p.cwd, 1, LIMITS.maxCwdChars, `${w}.cwd`, true);
  if (p.env !== undefined) {
    if (!isRecord(p.env)) fail(`${w}.env must be an object of strings`);
    const names = Object.keys(p.env);
    if (names.length > LIMITS.maxEnvVars) fail(`${w}.env: at most ${LIMITS.maxEnvVars} variables`);
    const entries = names.map((name): [string, string] => {
      if (name.length > LIMITS.maxEnvNameChars || !ENV_NAME.test(name))
        fail(`${w}.env: bad variable name ${JSON.stringify(name.slice(0, 64))}`);
      return [name, str((p.env as Record<string, unknown>)[name], 0, LIMITS.maxEnvValueChars, `${w}.env.${name}`, true)];
    });
    // fromEntries defines own properties, so a variable named __proto__ stays a variable.
    out.env = Object.fromEntries(entries);
  }
  if (p.terminal_size !== undefined) out.terminal_size = size(p.terminal_size, `${w}.terminal_size`);
  return out;
}

function serviceParameters(v: unknown): Record<string, unknown> {
  if (!isRecord(v)) fail('service_parameters must be an object');
  const keys = Object.keys(v);
  if (keys.length > LIMITS.maxServiceParameters) fail(`service_parameters: at most ${LIMITS.maxServiceParameters} keys`);
  for (const k of ['trace_id', 'idempotency_key', 'tenant_id']) {
    if (v[k] !== undefined) str(v[k], 0, 1024, `service_parameters.${k}`);
  }
  return v;
}

function extensions(v: unknown): string[] {
  if (!Array.isArray(v) || v.length > LIMITS.maxExtensions) fail(`extensions must be an array of at most ${LIMITS.maxExtensions} URIs`);
  const seen = new Set<string>();
  for (const [i, u] of v.entries()) {
    const s = str(u, 1, LIMITS.maxExtensionChars, `extensions[${i}]`);
    if (!URL.canParse(s) || !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(s)) fail(`extensions[${i}] must be an absolute URI`);
    if (seen.has(s)) fail(`extensions[${i}] is a duplicate`);
    seen.add(s);
  }
  return v as string[];
}

/** Decodes one client text frame (a string, or its UTF-8 bytes). */
export function decodeClientFrame(text: string | Uint8Array): DecodeResult {
  const bytes = typeof text === 'string' ? Buffer.byteLength(text) : text.byteLength;
  if (bytes > LIMITS.maxClientFrameBytes) {
    return { ok: false, code: 'INVALID_REQUEST', message: `frame is ${bytes} bytes, more than ${LIMITS.maxClientFrameBytes}` };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(typeof text === 'string' ? text : Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString('utf8'));
  } catch {
    return { ok: false, code: 'INVALID_REQUEST', message: 'frame is not JSON' };
  }
  if (!isRecord(raw)) return { ok: false, code: 'INVALID_REQUEST', message: 'frame must be one JSON object' };
  const id = typeof raw.id === 'string' && CLIENT_ID_RE.test(raw.id) ? raw.id : undefined;
  const withId = (code: DecodeErrorCode, message: string): DecodeResult =>
    id === undefined ? { ok: false, code, message } : { ok: false, code, message, id };
  try {
    const op = raw.op;
    if (typeof op !== 'string' || op.length === 0 || op.length > 64) fail('op must be a non-empty string of at most 64 characters');
    for (const k of Object.keys(raw)) if (!ENVELOPE_KEYS.has(k)) fail(`unknown envelope field ${JSON.stringify(k)}`);
    if (raw.id === undefined) fail('id is required');
    if (id === undefined) fail(`id must be 1..${LIMITS.maxIdChars} printable ASCII characters`);
    if (raw.ts === undefined) fail('ts is required');
    if (typeof raw.ts !== 'string' || raw.ts.length > 64 || !isRfc3339(raw.ts)) fail('ts must be an RFC 3339 date-time');
    if (raw.sequence !== undefined) fail('sequence is assigned by the server; a client must not send it');
    if (!('payload' in raw)) fail('payload is required');
    const env = { op, id, ts: raw.ts } as const;
    const extra: { service_parameters?: Record<string, unknown>; extensions?: string[]; replay_from?: number | null } = {};
    if (raw.service_parameters !== undefined) extra.service_parameters = serviceParameters(raw.service_parameters);
    if (raw.extensions !== undefined) extra.extensions = extensions(raw.extensions);
    if (raw.replay_from !== undefined) {
      if (op !== 'pty.join_session' && op !== 'SubscribeToTask') fail(`replay_from is accepted on pty.join_session only, not ${op}`);
      extra.replay_from = raw.replay_from === null ? null : int(raw.replay_from, 0, Number.MAX_SAFE_INTEGER, 'replay_from');
    }
    const p = raw.payload;
    if (serverOps.has(op)) fail(`${op} is sent by servers only`);
    if (!ptyOps.has(op) && op !== 'ping' && op !== 'pong') {
      if (!OP_NAME.test(op)) fail(`malformed op ${JSON.stringify(op)}`);
      if (p !== null && !isRecord(p)) fail('payload must be an object');
      const known = a2aOps.has(op) ? 'an A2A core operation this server does not serve yet' : 'not an operation of this binding';
      return withId('UNSUPPORTED_OPERATION', `${op} is ${known}`);
    }
    switch (op) {
      case 'pty.join_session': {
        if (!isRecord(p)) fail('pty.join_session: payload must be an object');
        return { ok: true, frame: { ...env, op, ...extra, payload: joinPayload(p) } };
      }
      case 'pty.session_input': {
        if (!isRecord(p)) fail('pty.session_input: payload must be an object');
        onlyKeys(p, ['data'], 'pty.session_input payload');
        if (typeof p.data !== 'string') fail('pty.session_input payload.data must be a base64 string');
        const input = decodeBase64(p.data);
        if (input === null) fail('pty.session_input payload.data is not canonical base64 (RFC 4648 section 4)');
        if (input.length > LIMITS.maxInputBytes) fail(`pty.session_input: ${input.length} bytes, more than ${LIMITS.maxInputBytes}`);
        return { ok: true, frame: { ...env, op, ...extra, payload: { data: p.data } }, input };
      }
      case 'pty.session_resize':
        return { ok: true, frame: { ...env, op, ...extra, payload: size(p, 'pty.session_resize payload') } };
      case 'pty.request_role': {
        if (!isRecord(p)) fail('pty.request_role: payload must be an object');
        onlyKeys(p, ['role'], 'pty.request_role payload');
        return {
          ok: true,
          frame: { ...env, op, ...extra, payload: { role: oneOf<Role>(p.role, ROLES, 'pty.request_role payload.role') } },
        };
      }
      case 'pty.request_keyframe':
        return { ok: true, frame: { ...env, op, ...extra, payload: emptyPayload(p, op) } };
      case 'pty.leave_session':
        return { ok: true, frame: { ...env, op, ...extra, payload: emptyPayload(p, op) } };
      case 'ping': {
        if (!isRecord(p)) fail('ping: payload must be an object');
        onlyKeys(p, ['client_ts'], 'ping payload');
        if (typeof p.client_ts !== 'string' || !isRfc3339(p.client_ts)) fail('ping payload.client_ts must be an RFC 3339 date-time');
        return { ok: true, frame: { ...env, op, ...extra, payload: { client_ts: p.client_ts } } };
      }
      case 'pong': {
        if (!isRecord(p)) fail('pong: payload must be an object');
        onlyKeys(p, ['client_ts', 'server_ts'], 'pong payload');
        for (const k of ['client_ts', 'server_ts'] as const) {
          const v = p[k];
          if (typeof v !== 'string' || !isRfc3339(v)) fail(`pong payload.${k} must be an RFC 3339 date-time`);
        }
        return {
          ok: true,
          frame: { ...env, op, ...extra, payload: { client_ts: p.client_ts as string, server_ts: p.server_ts as string } },
        };
      }
      default:
        return fail(`unhandled op ${op}`);
    }
  } catch (err) {
    if (err instanceof Invalid) return withId('INVALID_REQUEST', err.message);
    throw err;
  }
}
