/**
 * The `text` field of agent_output events, written straight into a frame as a JSON string
 * literal: byte for byte what `JSON.stringify(text)` encoded as UTF-8 gives, where `text` is the
 * chunk decoded by the stream-text.ts rules (a character split across chunks appears whole in the
 * chunk where it ends; invalid bytes become U+FFFD; a BOM is kept).
 *
 * The text of a chunk depends on the stream before it only through its **carry**: the 0–3 bytes
 * of a character begun at the end of the stream's previous chunk that the decoder holds back
 * ({@link heldAfter}). The agent actor keeps the carry per (command, stream) ({@link LiveText})
 * and hands it along with the chunk, so the text is a pure function of (carry, bytes, eof):
 * the main thread encodes live events from it and the replay encodes the same bytes later
 * (actors/protocol/chunk-events.ts).
 *
 * Fast path (nearly all PTY output): no carry and a complete, valid UTF-8 chunk (`isUtf8`): its
 * text IS its bytes, so they are copied with only JSON's escapes applied — no TextDecoder, no
 * JSON.stringify, no strings. Otherwise a fresh StreamTextDecoder is fed the carry, then the
 * chunk, and JSON.stringify writes the result (the slow path).
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
 * per-run native copies cost more than they save (see flamegraphs/ingest-worker-before.md).
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

const NONE = new Uint8Array(0);

/** Second-byte bounds of the UTF-8 leads whose second byte is restricted (WHATWG UTF-8 decoder). */
function secondByteOk(lead: number, b: number): boolean {
  if (lead === 0xe0) return b >= 0xa0 && b <= 0xbf;
  if (lead === 0xed) return b >= 0x80 && b <= 0x9f;
  if (lead === 0xf0) return b >= 0x90 && b <= 0xbf;
  if (lead === 0xf4) return b >= 0x80 && b <= 0x8f;
  return b >= 0x80 && b <= 0xbf;
}

/**
 * The bytes a streaming UTF-8 decoder holds back after decoding `carry` then `bytes` (not at
 * eof): the trailing valid prefix of an incomplete character, 0–3 bytes. A fresh decoder fed
 * these bytes is in the same state as the one that decoded the whole stream. Returns a shared
 * empty array when nothing is held (nearly always), else a fresh copy.
 */
export function heldAfter(carry: Uint8Array, bytes: Uint8Array): Uint8Array {
  const n = carry.byteLength + bytes.byteLength;
  const at = (i: number): number => (i < carry.byteLength ? carry[i]! : bytes[i - carry.byteLength]!);
  for (let k = 1; k <= 3 && k <= n; k++) {
    const lead = at(n - k);
    if ((lead & 0xc0) === 0x80) continue; // a continuation byte: the lead is further back
    const need = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
    if (need <= k) return NONE; // ASCII, an invalid lead, or a complete character
    for (let j = 1; j < k; j++) {
      const b = at(n - k + j);
      if (j === 1 ? !secondByteOk(lead, b) : b < 0x80 || b > 0xbf) return NONE;
    }
    const out = new Uint8Array(k);
    for (let j = 0; j < k; j++) out[j] = at(n - k + j);
    return out;
  }
  return NONE;
}

/**
 * Writes the JSON literal of the text of `bytes` after `carry` (what the stream's decoder held,
 * {@link heldAfter}) at `o`; returns the offset after it. `eof` flushes a character left
 * incomplete as U+FFFD.
 */
export function writeJsonText(out: Buffer, o: number, carry: Uint8Array, bytes: Uint8Array, eof: boolean): number {
  if (carry.byteLength === 0 && isUtf8(bytes)) return writeJsonUtf8(out, o, bytes);
  const decoder = new StreamTextDecoder();
  const text = decoder.decode(carry) + decoder.decode(bytes, eof);
  return o + out.write(JSON.stringify(text), o, 'utf8');
}

interface StreamState {
  carry: Uint8Array;
  nextOffset: number;
}

/**
 * The carry of each stream of one command, in arrival order (one per command, in the agent
 * actor). An offset jump (bytes missing before a chunk) starts the stream afresh, as the
 * tests' reference decoder (test/support/reference-output-event.ts) does.
 */
export class LiveText {
  readonly #streams = new Map<string, StreamState>();

  /** The carry the next chunk of `stream` is decoded after; advances the stream past it. */
  next(stream: string, offset: number, bytes: Uint8Array, eof: boolean): Uint8Array {
    let st = this.#streams.get(stream);
    if (st === undefined) {
      st = { carry: NONE, nextOffset: 0 };
      this.#streams.set(stream, st);
    }
    const carry = st.nextOffset === offset ? st.carry : NONE;
    st.nextOffset = offset + bytes.byteLength;
    st.carry = eof ? NONE : heldAfter(carry, bytes);
    return carry;
  }

  /** {@link next}, then the chunk's JSON literal written at `o`; returns the offset after it. */
  write(out: Buffer, o: number, stream: string, offset: number, bytes: Uint8Array, eof: boolean): number {
    return writeJsonText(out, o, this.next(stream, offset, bytes, eof), bytes, eof);
  }
}
