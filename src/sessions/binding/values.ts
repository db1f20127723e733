/** The scalar values of pty-ws.v1 frames: ids, RFC 3339 times, base64. */
import { randomFillSync } from 'node:crypto';
import { Buffer } from 'node:buffer';

/**
 * Random bytes for frame ids, drawn in blocks (every PTY output frame gets an id, and a call into
 * the CSPRNG per frame was a few per cent of a flood's main-thread time); each byte is used once.
 */
const kRandomPoolBytes = 4096;
const randomPool = Buffer.allocUnsafeSlow(kRandomPoolBytes);
let randomUsed = kRandomPoolBytes;

/**
 * A fresh UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, then 74 random bits. Node 20
 * has only crypto.randomUUID (v4), so the layout is written here; ids are not used for ordering
 * (the sequence is), so no monotonic counter within a millisecond.
 */
export function newFrameId(now: number = Date.now()): string {
  const b = Buffer.allocUnsafe(16);
  if (randomUsed + 10 > kRandomPoolBytes) {
    randomFillSync(randomPool);
    randomUsed = 0;
  }
  randomPool.copy(b, 6, randomUsed, randomUsed + 10);
  randomUsed += 10;
  b.writeUIntBE(now, 0, 6);
  b[6] = 0x70 | (b[6]! & 0x0f);
  b[8] = 0x80 | (b[8]! & 0x3f);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A request id a client may send: 1..128 printable ASCII characters, no space. */
export const CLIENT_ID_RE = /^[\x21-\x7e]{1,128}$/;

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/** True for an RFC 3339 date-time (section 5.6) with valid fields; a leap second (:60) is accepted. */
export function isRfc3339(s: string): boolean {
  const m = RFC3339.exec(s);
  if (m === null) return false;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
  if (day > days || hour > 23 || minute > 59 || second > 60) return false;
  if (m[8] !== 'Z' && m[8] !== 'z' && (Number(m[10]) > 23 || Number(m[11]) > 59)) return false;
  return true;
}

/** The sender's time as the frames carry it: RFC 3339 UTC with milliseconds. */
export function nowTs(now: number = Date.now()): string {
  return new Date(now).toISOString();
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Decodes canonical base64 (RFC 4648 section 4: standard alphabet, padded, unused bits zero) or
 * returns null. Node's decoder skips bad characters silently, hence the checks.
 */
export function decodeBase64(s: string): Buffer | null {
  if (!BASE64.test(s)) return null;
  const bytes = Buffer.from(s, 'base64');
  return bytes.toString('base64') === s ? bytes : null;
}

export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}
