/**
 * The `text` of output chunks: UTF-8 decoded per (command, stream) without breaking characters
 * that are split across chunks. A character belongs to the chunk in which it ENDS: the bytes of a
 * character begun in one chunk are held back and its text appears whole in the next chunk of the
 * same stream. Invalid bytes become U+FFFD; a byte-order mark is kept as a character (never
 * stripped), so a replay that starts mid-stream decodes the same text as the live stream did.
 *
 * Replays reproduce the live text exactly when the bytes before the first replayed chunk are
 * still retained: {@link primeFromTail} feeds the decoder the last ≤ 3 bytes of the stream before
 * it, which is all the state a UTF-8 decoder carries.
 */

/** Longest incomplete UTF-8 sequence a decoder can be holding. */
export const kMaxUtf8CarryBytes = 3;

/** Streaming decoder for one stream of one command. */
export class StreamTextDecoder {
  #decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

  /**
   * Text of `bytes`, holding back a trailing incomplete character. `end` (the stream's eof)
   * flushes what is held as U+FFFD.
   */
  decode(bytes: Uint8Array, end = false): string {
    return this.#decoder.decode(bytes, { stream: !end });
  }

  /** Forget any held bytes (after a gap: the next chunk starts fresh). */
  reset(): void {
    this.#decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  }

  /**
   * Reset, then put the decoder in the state it would be in after the stream's bytes so far, given
   * at least their last {@link kMaxUtf8CarryBytes} bytes (fewer only when the stream has fewer).
   */
  primeFromTail(tail: Uint8Array): void {
    this.reset();
    const from = Math.max(0, tail.byteLength - kMaxUtf8CarryBytes);
    if (tail.byteLength > from) this.#decoder.decode(tail.subarray(from), { stream: true });
  }
}

/**
 * The last ≤ 3 bytes of a stream ending just before a chunk, collected from the preceding chunks
 * of that stream (newest first). Returns null when the bytes are not all there: a preceding chunk
 * does not end exactly where the next begins (offsets), i.e. output is missing in between.
 */
export function tailBefore(offset: number, previous: Iterable<{ offset: number; bytes: Uint8Array }>): Uint8Array | null {
  const out = new Uint8Array(kMaxUtf8CarryBytes);
  let have = 0;
  let expectEnd = offset;
  for (const chunk of previous) {
    if (chunk.offset + chunk.bytes.byteLength !== expectEnd) return null;
    const take = Math.min(kMaxUtf8CarryBytes - have, chunk.bytes.byteLength);
    out.set(chunk.bytes.subarray(chunk.bytes.byteLength - take), kMaxUtf8CarryBytes - have - take);
    have += take;
    expectEnd = chunk.offset;
    if (have === kMaxUtf8CarryBytes || chunk.offset === 0) break;
  }
  if (have < kMaxUtf8CarryBytes && expectEnd !== 0) return null;
  return out.subarray(kMaxUtf8CarryBytes - have);
}
