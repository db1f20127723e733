/**
 * The one record format for everything that crosses a shard ring (main ⇄ worker shard):
 *
 * ```
 *   0        1         2              4                4 + keyBytes    align8(4 + keyBytes)
 *   ┌────────┬─────────┬──────────────┬────────────────┬───────────────┬──────────────────┐
 *   │ u8 kind│ u8 flags│ u16 keyBytes │ key (UTF-8)    │ zero pad (0-7)│ payload …        │
 *   └────────┴─────────┴──────────────┴────────────────┴───────────────┴──────────────────┘
 * ```
 *
 * keyBytes is little-endian. The header is padded to a multiple of 8 so the payload stays 8-byte
 * aligned inside a ring record (the ring aligns records to 8): aligned copies of large payloads
 * are several times faster than misaligned ones (see actors/ring/layout.ts). The key is the actor id on frames to an actor and the topic (or
 * target) on frames from an actor. A frame is written as two parts, the header (kind, flags,
 * keyBytes, key) and the caller's payload, so the ring copies the payload exactly once. The
 * kinds, with their direction, owner, key and payload, are listed in frame-kinds.ts.
 */

/** Frame flags (bit set). No flag is defined: senders write 0, decoders pass unknown bits through. */
export const FrameFlag = {
  kFlagNone: 0,
} as const;

/** Bytes before the key: kind, flags, keyBytes. */
export const kFrameHeaderBytes = 4;
/** Longest key in UTF-8 bytes (u16). */
export const kMaxFrameKeyBytes = 0xffff;

/** Thrown by decodeFrame for a record that is not a well-formed frame; nothing else is thrown. */
export class FrameDecodeError extends Error {
  override readonly name = 'FrameDecodeError';
  /** Stable reason, for counting. */
  readonly reason: 'too_short' | 'bad_kind' | 'key_overflow' | 'bad_utf8';
  constructor(reason: FrameDecodeError['reason'], message: string) {
    super(message);
    this.reason = reason;
  }
}

/** A decoded frame. `payload` is a view into the record (valid as long as the record is). */
export interface Frame {
  kind: number;
  flags: number;
  key: string;
  payload: Uint8Array;
}

const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const utf8Encoder = new TextEncoder();
const jsonDecoder = new TextDecoder();

/** JSON → UTF-8 bytes, for the kinds whose payload is JSON. */
export function encodeJson(value: unknown): Uint8Array {
  return utf8Encoder.encode(JSON.stringify(value));
}

/**
 * UTF-8 JSON → value; throws SyntaxError on bad input. A payload is a view into the ring, valid
 * only during the callback that received it: decode before returning.
 */
export function decodeJson<T>(payload: Uint8Array): T {
  return JSON.parse(jsonDecoder.decode(payload)) as T;
}

/** Bytes of the header (4 + UTF-8 key, padded to 8) for `key`. */
export function frameHeaderBytes(key: string): number {
  return paddedHeaderBytes(utf8Length(key));
}

function paddedHeaderBytes(keyBytes: number): number {
  return (kFrameHeaderBytes + keyBytes + 7) & ~7;
}

/** UTF-8 length of `s` without allocating. */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2; // a surrogate pair: 2 UTF-16 units, 4 UTF-8 bytes
      i++;
    } else n += 2; // BMP (lone surrogates become U+FFFD, also 3 bytes)
  }
  return n;
}

function checkKind(kind: number, flags: number): void {
  if (!Number.isInteger(kind) || kind < 1 || kind > 255) throw new RangeError(`frame kind must be 1..255, got ${kind}`);
  if (!Number.isInteger(flags) || flags < 0 || flags > 255) throw new RangeError(`frame flags must be 0..255, got ${flags}`);
}

/**
 * Builds frame headers into one reusable buffer, so sending a frame allocates nothing. The view
 * returned by `header` is valid until the next call: hand it to a ring's tryWrite right away
 * (the ring copies synchronously). One encoder per thread (or per producer) is enough.
 */
export class FrameEncoder {
  #buf = new Uint8Array(256);

  /** Header bytes for (kind, flags, key). RangeError for a kind/flags outside a byte or a key over 65,535 bytes. */
  header(kind: number, flags: number, key: string): Uint8Array {
    checkKind(kind, flags);
    if (key.length > kMaxFrameKeyBytes) throw new RangeError(`frame key is over ${kMaxFrameKeyBytes} bytes`);
    // ≤ 3 UTF-8 bytes per UTF-16 unit
    const worst = kFrameHeaderBytes + key.length * 3 + 7;
    if (worst > this.#buf.length) this.#buf = new Uint8Array(Math.min(kFrameHeaderBytes + kMaxFrameKeyBytes * 3 + 8, worst * 2));
    const buf = this.#buf;
    let keyBytes: number;
    let ascii = true;
    for (let i = 0; i < key.length; i++) {
      const c = key.charCodeAt(i);
      if (c >= 0x80) {
        ascii = false;
        break;
      }
      buf[kFrameHeaderBytes + i] = c;
    }
    if (ascii) keyBytes = key.length;
    else keyBytes = utf8Encoder.encodeInto(key, buf.subarray(kFrameHeaderBytes)).written;
    if (keyBytes > kMaxFrameKeyBytes) throw new RangeError(`frame key is ${keyBytes} bytes, max ${kMaxFrameKeyBytes}`);
    buf[0] = kind;
    buf[1] = flags;
    buf[2] = keyBytes & 0xff;
    buf[3] = keyBytes >>> 8;
    const total = paddedHeaderBytes(keyBytes);
    buf.fill(0, kFrameHeaderBytes + keyBytes, total);
    return buf.subarray(0, total);
  }
}

/** A fresh header (allocates; for code off the hot path). Same checks as FrameEncoder.header. */
export function encodeFrameHeader(kind: number, flags: number, key: string): Uint8Array {
  return new FrameEncoder().header(kind, flags, key).slice();
}

/** The frame as [header, payload] parts for RingProducer.tryWrite (allocates the header). */
export function encodeFrame(kind: number, flags: number, key: string, payload: Uint8Array): [Uint8Array, Uint8Array] {
  return [encodeFrameHeader(kind, flags, key), payload];
}

/** Decodes one ring record. Throws only FrameDecodeError; the payload is a view into `record`. */
export function decodeFrame(record: Uint8Array): Frame {
  if (record.byteLength < kFrameHeaderBytes) {
    throw new FrameDecodeError('too_short', `frame of ${record.byteLength} bytes is shorter than its header`);
  }
  const kind = record[0]!;
  if (kind === 0) throw new FrameDecodeError('bad_kind', 'frame kind 0 is invalid');
  const keyBytes = record[2]! | (record[3]! << 8);
  const keyEnd = kFrameHeaderBytes + keyBytes;
  const payloadStart = paddedHeaderBytes(keyBytes);
  if (payloadStart > record.byteLength) {
    throw new FrameDecodeError('key_overflow', `frame key of ${keyBytes} bytes overruns the ${record.byteLength}-byte record`);
  }
  return { kind, flags: record[1]!, key: decodeKey(record, keyEnd), payload: record.subarray(payloadStart) };
}

/**
 * The last keys decoded, by slot (key length and first byte): a stream of frames for the same
 * actor or command repeats its key, and handing back the same string saves building it again
 * and hashing it again on the next Map lookup. Tiny and per thread.
 */
const kKeyCacheSlots = 16;
const cachedKeys: Array<{ bytes: Uint8Array; key: string } | undefined> = new Array<undefined>(kKeyCacheSlots).fill(undefined);

function cachedKey(record: Uint8Array, keyEnd: number): { slot: number; key: string | undefined } {
  const n = keyEnd - kFrameHeaderBytes;
  const slot = (n + (n > 0 ? record[keyEnd - 1]! : 0)) & (kKeyCacheSlots - 1);
  const hit = cachedKeys[slot];
  if (hit === undefined || hit.bytes.byteLength !== n) return { slot, key: undefined };
  const bytes = hit.bytes;
  for (let i = 0; i < n; i++) if (bytes[i] !== record[kFrameHeaderBytes + i]) return { slot, key: undefined };
  return { slot, key: hit.key };
}

function decodeKey(record: Uint8Array, keyEnd: number): string {
  const n = keyEnd - kFrameHeaderBytes;
  if (n > 128) return decodeKeyText(record, keyEnd);
  const { slot, key } = cachedKey(record, keyEnd);
  if (key !== undefined) return key;
  const fresh = decodeKeyText(record, keyEnd);
  cachedKeys[slot] = { bytes: record.slice(kFrameHeaderBytes, keyEnd), key: fresh };
  return fresh;
}

function decodeKeyText(record: Uint8Array, keyEnd: number): string {
  // Actor ids and topics are ASCII in practice; short ASCII keys skip TextDecoder's call cost.
  if (keyEnd - kFrameHeaderBytes <= 64) {
    let s = '';
    let i = kFrameHeaderBytes;
    for (; i < keyEnd; i++) {
      const c = record[i]!;
      if (c >= 0x80) break;
      s += String.fromCharCode(c);
    }
    if (i === keyEnd) return s;
  }
  try {
    return utf8Decoder.decode(record.subarray(kFrameHeaderBytes, keyEnd));
  } catch {
    throw new FrameDecodeError('bad_utf8', 'frame key is not valid UTF-8');
  }
}
