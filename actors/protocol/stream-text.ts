/**
 * The `text` of output chunks: UTF-8 decoded per (command, stream) without breaking characters
 * that are split across chunks. A character belongs to the chunk in which it ENDS: the bytes of a
 * character begun in one chunk are held back and its text appears whole in the next chunk of the
 * same stream. Invalid bytes become U+FFFD; a byte-order mark is kept as a character (never
 * stripped). A replay repeats the text the live stream decoded: the replay state keeps each
 * chunk's encoded event, text included (command-replay.ts).
 */

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
}
