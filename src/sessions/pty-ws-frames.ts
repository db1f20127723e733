/**
 * Encoders of pty-ws.v1 frames (the frames are documented in pty-ws-protocol.ts): server frames
 * for the hub, client frames for clients and tests.
 */
import {
  CLIENT_OPS,
  kMaxInputBytes,
  MAGIC_INPUT,
  MAGIC_OUTPUT,
  PTY_WS_BINDING,
  PTY_WS_VERSION,
  type ClientFrame,
  type FrameErrorCode,
  type TerminalSize,
} from './pty-ws-protocol.js';

/** One backend/class pair of binding_hello's session_host. */
export interface SessionHostBackend {
  session_backend: string;
  session_class: string;
  supported: boolean;
  reason?: string;
}

/**
 * What this server and its agents really run: tmux/managed. The spec's other pairs (the default
 * bridge's native/direct, the reference agent's screen/managed and zellij/managed) are listed
 * with supported=false and reason not_implemented, so a client sees why its selection fails.
 */
export const SESSION_HOST_BACKENDS: readonly SessionHostBackend[] = [
  { session_backend: 'tmux', session_class: 'managed', supported: true },
  { session_backend: 'screen', session_class: 'managed', supported: false, reason: 'not_implemented' },
  { session_backend: 'zellij', session_class: 'managed', supported: false, reason: 'not_implemented' },
  { session_backend: 'native', session_class: 'direct', supported: false, reason: 'not_implemented' },
];

/** The first server frame. */
export function encodeHello(h: {
  sessionId: string;
  currentSeq: number;
  state: string;
  terminalSize: TerminalSize;
  pingIntervalMs: number;
  pongTimeoutMs: number;
  maxQueuedBytes: number;
  replayBytes: number;
}): string {
  return encodeServerFrame('binding_hello', {
    binding: PTY_WS_BINDING,
    version: PTY_WS_VERSION,
    session: { session_id: h.sessionId, current_seq: h.currentSeq, state: h.state, terminal_size: h.terminalSize },
    session_host: { backends: SESSION_HOST_BACKENDS, observe_supported: true, drive_supported: true, reattach_supported: true },
    supported_operations: CLIENT_OPS,
    limits: {
      max_input_bytes: kMaxInputBytes,
      ping_interval_ms: h.pingIntervalMs,
      pong_timeout_ms: h.pongTimeoutMs,
      max_queued_bytes: h.maxQueuedBytes,
      replay_bytes: h.replayBytes,
    },
  });
}

/** A client frame as JSON text (for clients and tests; the inverse of decodeClientFrame). */
export function encodeClientFrame(f: ClientFrame): string {
  switch (f.op) {
    case 'pty.join_session': {
      const o: Record<string, unknown> = { op: f.op };
      if (f.role !== undefined) o['role'] = f.role;
      if (f.sessionBackend !== undefined) o['session_backend'] = f.sessionBackend;
      if (f.sessionClass !== undefined) o['session_class'] = f.sessionClass;
      if (f.argv !== undefined) o['argv'] = f.argv;
      if (f.cwd !== undefined) o['cwd'] = f.cwd;
      if (f.env !== undefined) o['env'] = { ...f.env };
      if (f.terminalSize !== undefined) o['terminal_size'] = { cols: f.terminalSize.cols, rows: f.terminalSize.rows };
      if (f.replayFrom !== undefined) o['replay_from'] = f.replayFrom;
      if (f.binaryOutput) o['binary_output'] = true;
      if (f.clientLabel !== undefined) o['client_label'] = f.clientLabel;
      return JSON.stringify(o);
    }
    case 'pty.session_input':
      return JSON.stringify({ op: f.op, data: Buffer.from(f.data).toString('base64') });
    case 'pty.session_resize':
      return JSON.stringify({ op: f.op, cols: f.cols, rows: f.rows });
    case 'pty.request_role':
      return JSON.stringify({ op: f.op, role: f.role });
    case 'pty.leave_session':
      return JSON.stringify({ op: f.op });
    case 'ping':
    case 'pong':
      return JSON.stringify(f.id === undefined ? { op: f.op } : { op: f.op, id: f.id });
  }
}

/** Binary input frame ("PW1I" + bytes). */
export function encodeBinaryInput(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + data.byteLength);
  out.set(MAGIC_INPUT, 0);
  out.set(data, 4);
  return out;
}

/** pty.output as JSON text; built by concatenation (base64 needs no escaping). */
export function encodeOutputJson(seq: number, data: Uint8Array): string {
  return `{"op":"pty.output","seq":${seq},"data":"${Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64')}"}`;
}

/** pty.output as a binary frame: "PW1O" + seq (u64 big-endian) + raw bytes. */
export function encodeOutputBinary(seq: number, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.byteLength);
  out.set(MAGIC_OUTPUT, 0);
  new DataView(out.buffer).setBigUint64(4, BigInt(seq));
  out.set(data, 12);
  return out;
}

/** Parses a binary output frame (clients, tests); null when it is not one. */
export function decodeOutputBinary(frame: Uint8Array): { seq: number; data: Uint8Array } | null {
  if (frame.byteLength < 12 || MAGIC_OUTPUT.some((b, i) => frame[i] !== b)) return null;
  const seq = Number(new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getBigUint64(4));
  return { seq, data: frame.subarray(12) };
}

/** Any other server frame: `{op, ...fields}` as JSON text. */
export function encodeServerFrame(op: string, fields: Record<string, unknown> = {}): string {
  return JSON.stringify({ op, ...fields });
}

export function encodeError(code: FrameErrorCode, message: string, fatal: boolean): string {
  return encodeServerFrame('error', { code, message, fatal });
}
