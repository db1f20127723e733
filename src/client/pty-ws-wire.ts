/**
 * pty-ws.v1 as sandboxd's own clients (the dashboard, sbx) read and write it: the subprotocols,
 * the close codes, the server frames turned into typed messages, the client frames, and the
 * `pty-ws.v1.binary` messages (PW1O output, PW1I input). The server's side of the same binding is
 * src/sessions/binding/ (its README tables every frame). This file restates the few facts a client
 * needs because the client is bundled for the browser and may import no server folder (see
 * .dependency-cruiser.cjs); test/unit/client/pty-ws.test.ts runs the client against the server's
 * own encoders, so the two sides cannot drift apart unnoticed.
 *
 * Browser-safe: TextDecoder, atob/btoa (base64.ts) and crypto.getRandomValues only.
 */
import { base64ToBytes } from './base64.js';

/** JSON text frames only. */
export const PTY_WS_SUBPROTOCOL = 'pty-ws.v1';
/** JSON control frames plus PTY bytes in binary messages (PW1O/PW1I); preferred by the server when offered. */
export const PTY_WS_BINARY_SUBPROTOCOL = 'pty-ws.v1.binary';
/** The snapshot format of Keyframes: VT sequences that redraw the screen on a reset terminal. */
export const KEYFRAME_FORMAT_VT100 = 'vt100-screen-state-v1';
/** Largest decoded input of one frame; longer input is sent in several. */
export const kMaxInputBytes = 64 * 1024;
/** Terminal columns and rows: 1..1024 each. */
export const kMaxTerminalDim = 1024;
/** client_label: at most 128 characters. */
export const kMaxLabelChars = 128;

/** WebSocket close codes of pty-ws.v1 (the published table and sandboxd's additions), and 1006. */
export const PtyCloseCode = {
  /** Left (pty.leave_session), or the orderly close after binding_goodbye. */
  normal: 1000,
  /** The server is stopping. */
  goingAway: 1001,
  /** No close frame: network, refused upgrade, or a server this client stopped hearing from. */
  abnormal: 1006,
  /** Server fault, or a WebSocket Pong not returned in time. */
  serverError: 1011,
  /** A frame the server refused (bad envelope, unknown subprotocol). */
  protocolError: 4400,
  unauthenticated: 4401,
  forbidden: 4403,
  /** No such session. */
  sessionNotFound: 4404,
  /** This client read too slowly and was cut off; rejoin with replay_from. */
  slowConsumer: 4413,
  rateLimited: 4429,
} as const;

export type PtyRole = 'controller' | 'observer';
export type PtyOutputStream = 'stdout' | 'stderr' | 'log';

export interface PtyClientRef {
  client_id: string;
  label?: string;
}

/** One message from the server, decoded; sequences are the session's frame counter. */
export type PtyServerMessage =
  | { type: 'hello'; payload: Record<string, unknown>; sessionId: string | undefined; currentSequence: number | undefined }
  | { type: 'output'; sequence: number; stream: PtyOutputStream; bytes: Uint8Array }
  | { type: 'resize'; sequence: number; cols: number; rows: number }
  | { type: 'role'; sequence: number; role: PtyRole; clientId: string; downgraded: boolean; reason: string | undefined }
  | { type: 'membership'; sequence: number; controllers: PtyClientRef[]; observers: PtyClientRef[] }
  | {
      type: 'keyframe';
      sequence: number;
      snapshot: Uint8Array;
      format: string;
      cols: number;
      rows: number;
      anchorSequence: number;
    }
  | { type: 'closed'; sequence: number; exitCode: number | null; reason: string; detail: string | undefined }
  /** A pty.session_frame of kind Error: a PTY-level problem (PTY_WRITE_FAILED, …); the connection goes on. */
  | { type: 'session_error'; sequence: number; code: string; message: string }
  /** The binding's Error frame; `id` is the failed request's. */
  | { type: 'error'; id: string; code: string; message: string; retryable: boolean }
  | { type: 'goodbye'; reason: string; detail: string | undefined }
  | { type: 'ping'; id: string; clientTs: string }
  | { type: 'pong'; id: string; clientTs: string; serverTs: string }
  /** Not a frame of the binding (or a kind this client does not know): ignored. */
  | { type: 'invalid'; reason: string };

const OUTPUT_MAGIC = [0x50, 0x57, 0x31, 0x4f]; // "PW1O"
const INPUT_MAGIC = [0x50, 0x57, 0x31, 0x49]; // "PW1I"
const OUTPUT_HEADER_BYTES = 13;
const STREAMS: Readonly<Record<number, PtyOutputStream>> = { 1: 'stdout', 2: 'stderr', 3: 'log' };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isSeq = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isDim = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= kMaxTerminalDim;
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const invalid = (reason: string): PtyServerMessage => ({ type: 'invalid', reason });

function clientRefs(v: unknown): PtyClientRef[] | null {
  if (!Array.isArray(v)) return null;
  const out: PtyClientRef[] = [];
  for (const r of v) {
    if (!isObj(r) || typeof r['client_id'] !== 'string') return null;
    const label = str(r['label']);
    out.push(label === undefined ? { client_id: r['client_id'] } : { client_id: r['client_id'], label });
  }
  return out;
}

function decodeB64(s: unknown): Uint8Array | null {
  if (typeof s !== 'string') return null;
  try {
    return base64ToBytes(s);
  } catch {
    return null;
  }
}

/** A PW1O message: "PW1O" | sequence u64 big-endian | stream byte | bytes (a view into `msg`). */
export function decodeOutputMessage(msg: Uint8Array): PtyServerMessage {
  if (msg.byteLength < OUTPUT_HEADER_BYTES || OUTPUT_MAGIC.some((b, i) => msg[i] !== b))
    return invalid('a binary message that is not PW1O output');
  const sequence = new DataView(msg.buffer, msg.byteOffset, msg.byteLength).getBigUint64(4, false);
  if (sequence > BigInt(Number.MAX_SAFE_INTEGER)) return invalid('PW1O sequence beyond 2^53 - 1');
  const stream = STREAMS[msg[12]!];
  if (stream === undefined) return invalid(`PW1O stream byte ${msg[12]}`);
  return { type: 'output', sequence: Number(sequence), stream, bytes: msg.subarray(OUTPUT_HEADER_BYTES) };
}

/** A PW1I message carrying `bytes` (the caller keeps it within kMaxInputBytes). */
export function encodeInputMessage(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(INPUT_MAGIC.length + bytes.byteLength);
  out.set(INPUT_MAGIC, 0);
  out.set(bytes, INPUT_MAGIC.length);
  return out;
}

function sessionMessage(sequence: number, p: Obj): PtyServerMessage {
  switch (p['kind']) {
    case 'Output': {
      const bytes = decodeB64(p['data']);
      const stream = p['stream'];
      if (bytes === null || (stream !== 'stdout' && stream !== 'stderr' && stream !== 'log'))
        return invalid('Output without base64 data or stream');
      return { type: 'output', sequence, stream, bytes };
    }
    case 'Resize':
      if (!isDim(p['cols']) || !isDim(p['rows'])) return invalid('Resize without cols/rows');
      return { type: 'resize', sequence, cols: p['cols'], rows: p['rows'] };
    case 'RoleAssigned':
      if ((p['role'] !== 'controller' && p['role'] !== 'observer') || typeof p['client_id'] !== 'string')
        return invalid('RoleAssigned without role/client_id');
      return {
        type: 'role',
        sequence,
        role: p['role'],
        clientId: p['client_id'],
        downgraded: p['downgraded'] === true,
        reason: str(p['reason']),
      };
    case 'MembershipChanged': {
      const controllers = clientRefs(p['controllers']);
      const observers = clientRefs(p['observers']);
      if (controllers === null || observers === null) return invalid('MembershipChanged without client lists');
      return { type: 'membership', sequence, controllers, observers };
    }
    case 'Keyframe': {
      const snapshot = decodeB64(p['snapshot']);
      const format = str(p['snapshot_format']);
      if (
        snapshot === null ||
        format === undefined ||
        !isDim(p['snapshot_cols']) ||
        !isDim(p['snapshot_rows']) ||
        !isSeq(p['anchor_sequence'])
      )
        return invalid('Keyframe with a missing or bad field');
      return {
        type: 'keyframe',
        sequence,
        snapshot,
        format,
        cols: p['snapshot_cols'],
        rows: p['snapshot_rows'],
        anchorSequence: p['anchor_sequence'],
      };
    }
    case 'Closed': {
      const exit = p['exit_code'];
      return {
        type: 'closed',
        sequence,
        exitCode: typeof exit === 'number' && Number.isInteger(exit) ? exit : null,
        reason: str(p['reason']) ?? 'normal',
        detail: str(p['detail']),
      };
    }
    case 'Error':
      return { type: 'session_error', sequence, code: str(p['code']) ?? 'PTY_ERROR', message: str(p['message']) ?? '' };
    default:
      return invalid(`unknown session frame kind ${JSON.stringify(p['kind'])}`);
  }
}

/**
 * Decodes one WebSocket message of the server: JSON text, or (an ArrayBuffer or a view) a PW1O
 * message. Never throws: what is not a frame of the binding comes back as `invalid`.
 */
export function decodeServerMessage(data: unknown): PtyServerMessage {
  if (data instanceof ArrayBuffer) return decodeOutputMessage(new Uint8Array(data));
  if (ArrayBuffer.isView(data)) return decodeOutputMessage(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  if (typeof data !== 'string') return invalid('neither text nor binary');
  let f: unknown;
  try {
    f = JSON.parse(data);
  } catch {
    return invalid('text that is not JSON');
  }
  if (!isObj(f) || !isObj(f['payload'])) return invalid('not an object with a payload');
  const p = f['payload'];
  const id = str(f['id']) ?? '';
  switch (f['op']) {
    case 'binding_hello': {
      const session = isObj(p['session']) ? p['session'] : {};
      return {
        type: 'hello',
        payload: p,
        sessionId: str(session['session_id']),
        currentSequence: isSeq(session['current_sequence']) ? session['current_sequence'] : undefined,
      };
    }
    case 'pty.session_frame':
      return isSeq(f['sequence']) ? sessionMessage(f['sequence'], p) : invalid('a session frame without a sequence');
    case 'Error':
      return {
        type: 'error',
        id,
        code: str(p['code']) ?? 'INTERNAL',
        message: str(p['message']) ?? '',
        retryable: p['retryable'] === true,
      };
    case 'binding_goodbye':
      return { type: 'goodbye', reason: str(p['reason']) ?? 'other', detail: str(p['detail']) };
    case 'ping':
      return { type: 'ping', id, clientTs: str(p['client_ts']) ?? '' };
    case 'pong':
      return { type: 'pong', id, clientTs: str(p['client_ts']) ?? '', serverTs: str(p['server_ts']) ?? '' };
    default:
      return invalid(`unknown op ${JSON.stringify(f['op'])}`);
  }
}

/**
 * A fresh request id: a UUIDv7 (48-bit Unix milliseconds, version 7, 74 random bits), as the
 * published schema asks. Ids only pair answers with requests; the sequence orders frames.
 */
export function newRequestId(nowMs: number = Date.now()): string {
  const b = new Uint8Array(16);
  globalThis.crypto.getRandomValues(b.subarray(6));
  let t = nowMs;
  for (let i = 5; i >= 0; i--) {
    b[i] = t % 256;
    t = Math.floor(t / 256);
  }
  b[6] = 0x70 | (b[6]! & 0x0f);
  b[8] = 0x80 | (b[8]! & 0x3f);
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The text of one client frame: envelope {op, id, ts, replay_from?, payload}. */
export function clientFrameText(op: string, payload: Obj, extra: { id?: string; replayFrom?: number } = {}): string {
  const frame: Obj = { op, id: extra.id ?? newRequestId(), ts: new Date().toISOString() };
  if (extra.replayFrom !== undefined) frame['replay_from'] = extra.replayFrom;
  frame['payload'] = payload;
  return JSON.stringify(frame);
}
