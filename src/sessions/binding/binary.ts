/**
 * The `pty-ws.v1.binary` hot path: PTY bytes in WebSocket binary frames, everything else stays
 * JSON text. Layout as the reference executor writes and reads it (its pty_ws binding module:
 * the PW1O/PW1I magics, a 13-byte output header, stream 1 = stdout):
 *
 *   server → client output   offset 0  4 bytes  ASCII "PW1O" (0x50 0x57 0x31 0x4f)
 *                            offset 4  8 bytes  sequence, unsigned 64-bit big-endian
 *                            offset 12 1 byte   stream: 1 stdout (2 stderr, 3 log: sandboxd's numbering)
 *                            offset 13 …        raw PTY bytes (the rest of the message)
 *   client → server input    offset 0  4 bytes  ASCII "PW1I" (0x50 0x57 0x31 0x49)
 *                            offset 4  …        raw input bytes (the rest of the message)
 *
 * A PW1O frame carries the same sequence as the pty.session_frame Output it replaces; one
 * session counter serves both representations. Binary frames are valid only on a connection
 * that negotiated pty-ws.v1.binary.
 */
import { LIMITS, SUBPROTOCOL_BINARY, SUBPROTOCOL_JSON, type OutputStream, type Subprotocol } from './codes.js';

export const OUTPUT_MAGIC = Uint8Array.of(0x50, 0x57, 0x31, 0x4f); // "PW1O"
export const INPUT_MAGIC = Uint8Array.of(0x50, 0x57, 0x31, 0x49); // "PW1I"
export const OUTPUT_HEADER_BYTES = 13;

export const STREAM_IDS: Readonly<Record<OutputStream, number>> = { stdout: 1, stderr: 2, log: 3 };
const STREAMS: Readonly<Record<number, OutputStream>> = { 1: 'stdout', 2: 'stderr', 3: 'log' };

function hasMagic(b: Uint8Array, magic: Uint8Array): boolean {
  return b.byteLength >= 4 && b[0] === magic[0] && b[1] === magic[1] && b[2] === magic[2] && b[3] === magic[3];
}

/** One PW1O message: header + the output bytes (copied once). */
export function encodeBinaryOutput(sequence: number, bytes: Uint8Array, stream: OutputStream = 'stdout'): Uint8Array {
  if (!Number.isSafeInteger(sequence) || sequence < 0) throw new RangeError(`sequence ${sequence} is not a non-negative safe integer`);
  const out = new Uint8Array(OUTPUT_HEADER_BYTES + bytes.byteLength);
  out.set(OUTPUT_MAGIC, 0);
  new DataView(out.buffer).setBigUint64(4, BigInt(sequence), false);
  out[12] = STREAM_IDS[stream];
  out.set(bytes, OUTPUT_HEADER_BYTES);
  return out;
}

export type BinaryDecodeResult<T> = { ok: true; value: T } | { ok: false; code: 'INVALID_REQUEST'; message: string };

/** Reads a PW1O message (clients and tests); `bytes` is a view into the message. */
export function decodeBinaryOutput(msg: Uint8Array): BinaryDecodeResult<{ sequence: number; stream: OutputStream; bytes: Uint8Array }> {
  if (!hasMagic(msg, OUTPUT_MAGIC)) return { ok: false, code: 'INVALID_REQUEST', message: 'binary output frames start with PW1O' };
  if (msg.byteLength < OUTPUT_HEADER_BYTES)
    return { ok: false, code: 'INVALID_REQUEST', message: 'PW1O frame shorter than its 13-byte header' };
  const seq = new DataView(msg.buffer, msg.byteOffset, msg.byteLength).getBigUint64(4, false);
  if (seq > BigInt(Number.MAX_SAFE_INTEGER)) return { ok: false, code: 'INVALID_REQUEST', message: 'PW1O sequence beyond 2^53 - 1' };
  const stream = STREAMS[msg[12]!];
  if (stream === undefined) return { ok: false, code: 'INVALID_REQUEST', message: `PW1O stream byte ${msg[12]} is not 1, 2 or 3` };
  return { ok: true, value: { sequence: Number(seq), stream, bytes: msg.subarray(OUTPUT_HEADER_BYTES) } };
}

/** One PW1I message (sandboxd's own clients and tests). */
export function encodeBinaryInput(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + bytes.byteLength);
  out.set(INPUT_MAGIC, 0);
  out.set(bytes, 4);
  return out;
}

/** Reads a client's PW1I message: the input bytes (a view), at most LIMITS.maxInputBytes. */
export function decodeBinaryInput(msg: Uint8Array): BinaryDecodeResult<Uint8Array> {
  if (!hasMagic(msg, INPUT_MAGIC)) return { ok: false, code: 'INVALID_REQUEST', message: 'binary input frames start with PW1I' };
  const bytes = msg.subarray(4);
  if (bytes.byteLength > LIMITS.maxInputBytes) {
    return { ok: false, code: 'INVALID_REQUEST', message: `PW1I input is ${bytes.byteLength} bytes, more than ${LIMITS.maxInputBytes}` };
  }
  return { ok: true, value: bytes };
}

/**
 * Picks the subprotocol from a Sec-WebSocket-Protocol offer: pty-ws.v1.binary when offered (the
 * reference prefers it too), else pty-ws.v1, else null (refuse the upgrade with 400). Tokens are
 * compared exactly; other offers (e.g. a `bearer.<token>` carrier) are ignored.
 */
export function selectSubprotocol(offer: string | undefined): Subprotocol | null {
  if (offer === undefined) return null;
  const tokens = offer.split(',').map((t) => t.trim());
  if (tokens.includes(SUBPROTOCOL_BINARY)) return SUBPROTOCOL_BINARY;
  if (tokens.includes(SUBPROTOCOL_JSON)) return SUBPROTOCOL_JSON;
  return null;
}
