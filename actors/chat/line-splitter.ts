/**
 * NDJSON line reassembly over arbitrary byte chunks. Lines are split on the LF byte, which never
 * occurs inside a multi-byte UTF-8 character, so a character split across chunks is reassembled
 * before decoding. A trailing CR is dropped (CRLF). A line longer than `maxLineBytes` keeps its
 * first `maxLineBytes` bytes (cut at a character boundary) and is marked truncated; the rest of
 * it is skipped up to the next LF, so memory stays bounded whatever the command prints.
 */

/** Default longest line kept whole: 1 MiB. */
export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;

export interface Line {
  /** Decoded text without the line break (invalid UTF-8 becomes U+FFFD). */
  text: string;
  /** 1-based ordinal of the line in the output (empty lines count). */
  line: number;
  /** Bytes of the line as printed (without the line break), including any cut off. */
  byteLength: number;
  /** The line was longer than maxLineBytes and `text` is only its start. */
  truncated: boolean;
  /** The output ended without a line break after this line. */
  partial: boolean;
}

const kLf = 0x0a;
const kCr = 0x0d;

export class LineSplitter {
  readonly maxLineBytes: number;
  readonly #decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  /** Copies of the pieces of the current line (the caller's chunks are not kept). */
  #pieces: Uint8Array[] = [];
  #kept = 0;
  #seen = 0;
  #truncated = false;
  #line = 0;

  constructor(maxLineBytes: number = DEFAULT_MAX_LINE_BYTES) {
    if (!Number.isSafeInteger(maxLineBytes) || maxLineBytes < 1)
      throw new RangeError(`maxLineBytes must be a positive integer, got ${maxLineBytes}`);
    this.maxLineBytes = maxLineBytes;
  }

  /** Lines completed so far. */
  get lineCount(): number {
    return this.#line;
  }

  /** Feed bytes; `onLine` is called for every line they complete. */
  push(bytes: Uint8Array, onLine: (line: Line) => void): void {
    let start = 0;
    for (;;) {
      const lf = bytes.indexOf(kLf, start);
      if (lf < 0) {
        this.#hold(bytes.subarray(start));
        return;
      }
      const piece = bytes.subarray(start, lf);
      if (this.#pieces.length === 0 && !this.#truncated && piece.byteLength <= this.maxLineBytes) {
        this.#seen = piece.byteLength;
        onLine(this.#emit(piece, false));
      } else {
        this.#hold(piece);
        onLine(this.#emit(this.#join(), false));
      }
      start = lf + 1;
    }
  }

  /** The output ended: a pending line without a break is emitted (partial), if any. */
  end(onLine: (line: Line) => void): void {
    if (this.#seen === 0) return;
    onLine(this.#emit(this.#join(), true));
  }

  #hold(bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    this.#seen += bytes.byteLength;
    const room = this.maxLineBytes - this.#kept;
    if (room <= 0) {
      this.#truncated = true;
      return;
    }
    const take = Math.min(room, bytes.byteLength);
    if (take < bytes.byteLength) this.#truncated = true;
    this.#pieces.push(bytes.slice(0, take));
    this.#kept += take;
  }

  #join(): Uint8Array {
    const pieces = this.#pieces;
    let out: Uint8Array;
    if (pieces.length === 1) out = pieces[0] as Uint8Array;
    else {
      out = new Uint8Array(this.#kept);
      let at = 0;
      for (const p of pieces) {
        out.set(p, at);
        at += p.byteLength;
      }
    }
    if (this.#truncated) out = out.subarray(0, charBoundary(out, out.byteLength));
    return out;
  }

  #emit(bytes: Uint8Array, partial: boolean): Line {
    let end = bytes.byteLength;
    if (!this.#truncated && end > 0 && bytes[end - 1] === kCr) end--;
    const line: Line = {
      text: this.#decoder.decode(bytes.subarray(0, end)),
      line: ++this.#line,
      byteLength: this.#truncated ? this.#seen : end,
      truncated: this.#truncated,
      partial,
    };
    this.#pieces = [];
    this.#kept = 0;
    this.#seen = 0;
    this.#truncated = false;
    return line;
  }
}

/** The largest cut ≤ `at` that does not split a UTF-8 character. */
function charBoundary(bytes: Uint8Array, at: number): number {
  let cut = at;
  // step back over continuation bytes to the lead byte of the last character
  while (cut > 0 && ((bytes[cut - 1] ?? 0) & 0xc0) === 0x80) cut--;
  if (cut === 0) return at;
  const lead = bytes[cut - 1] ?? 0;
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return at - (cut - 1) >= need ? at : cut - 1;
}
