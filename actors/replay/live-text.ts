/**
 * The `text` field of live agent_output events, written straight into a frame as a JSON string
 * literal: byte for byte what `JSON.stringify(text)` encoded as UTF-8 gives, where `text` is the
 * chunk decoded by the stream-text.ts rules (a character split across chunks appears whole in the
 * chunk where it ends; invalid bytes become U+FFFD; a BOM is kept).
 *
 * Fast path (nearly all PTY output): when nothing is held back from the stream's previous chunk
 * and the chunk is complete, valid UTF-8 (`isUtf8`), its text IS its bytes, so they are copied
 * with only JSON's escapes applied — no TextDecoder, no JSON.stringify, no strings. Otherwise the
 * stream's StreamTextDecoder and JSON.stringify do it (the slow path), and the decoder then holds
 * the bytes of a character cut at the chunk's end, which sends the next chunk down the slow path
 * too so that the character is completed there.
 */
import { isUtf8 } from 'node:buffer';
import { StreamTextDecoder } from './stream-text.js';

/** Upper bound of the bytes `write` produces for a chunk of `n` bytes. */
export function maxJsonTextBytes(n: number): number {
  // \u00XX is 6 bytes per input byte; a held-back character and U+FFFD replacements stay below.
  return 6 * (n + 4) + 2;
}

const HEX = Uint8Array.from('0123456789abcdef', (c) => c.charCodeAt(0));
const kQuote = 0x22;
const kBackslash = 0x5c;
/** What a byte becomes: 0 itself, 1 backslash + itself (" and \), 2 a two-byte escape (\b \t \n \f \r), 3 \u00XX. */
const KIND = new Uint8Array(256);
/** Second byte of the two-byte escapes, by control byte. */
const SHORT = new Uint8Array(0x20);
for (let b = 0; b < 0x20; b++) KIND[b] = 3;
KIND[kQuote] = 1;
KIND[kBackslash] = 1;
for (const [b, c] of [
  [0x08, 'b'],
  [0x09, 't'],
  [0x0a, 'n'],
  [0x0c, 'f'],
  [0x0d, 'r'],
] as const) {
  KIND[b] = 2;
  SHORT[b] = c.charCodeAt(0);
}

/**
 * Writes `"…"` for valid UTF-8 `bytes` into `out` at `o`; returns the offset after it. A plain
 * table-driven byte loop: PTY output has an escape every few dozen bytes (ESC, CR, LF), where
 * per-run native copies cost more than they save (see flamegraphs/ingest-worker.md).
 */
export function writeJsonUtf8(out: Uint8Array, o: number, bytes: Uint8Array): number {
  out[o++] = kQuote;
  for (let i = 0, n = bytes.length; i < n; i++) {
    const b = bytes[i] as number;
    const kind = KIND[b] as number;
    if (kind === 0) {
      out[o++] = b;
      continue;
    }
    out[o++] = kBackslash;
    if (kind === 1) out[o++] = b;
    else if (kind === 2) out[o++] = SHORT[b] as number;
    else {
      out[o++] = 0x75; // u
      out[o++] = 0x30;
      out[o++] = 0x30;
      out[o++] = HEX[b >> 4] as number;
      out[o++] = HEX[b & 15] as number;
    }
  }
  out[o++] = kQuote;
  return o;
}

/** How many bytes at the end of `bytes` begin a UTF-8 sequence that is not complete (0–3). */
export function incompleteTail(bytes: Uint8Array): number {
  const n = bytes.length;
  for (let back = 1; back <= 3 && back <= n; back++) {
    const b = bytes[n - back] as number;
    if ((b & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

interface StreamState {
  decoder: StreamTextDecoder | undefined;
  /** The last ≤ 3 bytes of the stream so far (where a character the decoder holds must start). */
  last: Uint8Array;
  nextOffset: number;
}

const NONE = new Uint8Array(0);

/** A copy of the last ≤ 3 bytes of `a` followed by `b` (b is the caller's view: never keep it). */
function last3(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.min(3, a.byteLength + b.byteLength));
  if (b.byteLength >= 3) {
    out.set(b.subarray(b.byteLength - 3));
    return out;
  }
  const fromA = out.length - b.byteLength;
  out.set(a.subarray(a.byteLength - fromA), 0);
  out.set(b, fromA);
  return out;
}

/** Live text of one command's streams, in arrival order (one per command). */
export class LiveText {
  readonly #streams = new Map<string, StreamState>();

  /** Writes the JSON literal of the next chunk's text of `stream` at `o`; returns the offset after it. */
  write(out: Buffer, o: number, stream: string, offset: number, bytes: Uint8Array, eof: boolean): number {
    let st = this.#streams.get(stream);
    if (st === undefined) {
      st = { decoder: undefined, last: NONE, nextOffset: 0 };
      this.#streams.set(stream, st);
    }
    if (st.nextOffset !== offset) {
      // Bytes are missing before this chunk: start afresh, as the reference decoder
      // (output-event.ts) does on an offset jump.
      st.decoder?.reset();
      st.last = NONE;
    }
    st.nextOffset = offset + bytes.byteLength;
    // The decoder can only be holding bytes when the stream so far ends with an incomplete
    // sequence (a conservative test: a false "maybe" merely takes the slow path once more).
    const holding = incompleteTail(st.last) > 0;
    st.last = eof ? NONE : last3(st.last, bytes);
    if (!holding && isUtf8(bytes)) return writeJsonUtf8(out, o, bytes);
    st.decoder ??= new StreamTextDecoder();
    return o + out.write(JSON.stringify(st.decoder.decode(bytes, eof)), o, 'utf8');
  }
}
