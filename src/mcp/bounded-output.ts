/**
 * One stream of a command's output as the MCP `run_command` result keeps it: at most `maxBytes`,
 * the first half and the last half of what the command wrote, with the count of the bytes left out
 * between them. An assistant sees how the command started and how it ended (the summary of a test
 * run, the last error), and is told exactly how much it did not see.
 *
 * Memory is bounded by `maxBytes` plus one chunk: the tail is a list of chunks trimmed from the
 * front as new ones arrive.
 */

export interface KeptOutput {
  /** What was kept, as UTF-8 text (a character cut at the head/tail seam becomes U+FFFD). */
  readonly text: string;
  /** Every byte the stream carried. */
  readonly totalBytes: number;
  /** Bytes between the head and the tail that the result does not hold (0: nothing left out). */
  readonly omittedBytes: number;
}

export class BoundedOutput {
  readonly #headMax: number;
  readonly #tailMax: number;
  readonly #head: Buffer[] = [];
  #headBytes = 0;
  readonly #tail: Buffer[] = [];
  #tailBytes = 0;
  #total = 0;

  /** @param maxBytes what the result may hold of this stream, head and tail together (≥ 2). */
  constructor(maxBytes: number) {
    this.#headMax = Math.ceil(maxBytes / 2);
    this.#tailMax = Math.floor(maxBytes / 2);
  }

  get totalBytes(): number {
    return this.#total;
  }

  push(data: Buffer): void {
    this.#total += data.byteLength;
    let rest = data;
    if (this.#headBytes < this.#headMax) {
      const take = Math.min(this.#headMax - this.#headBytes, rest.byteLength);
      this.#head.push(rest.subarray(0, take));
      this.#headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.byteLength === 0 || this.#tailMax === 0) return;
    this.#tail.push(rest);
    this.#tailBytes += rest.byteLength;
    while (this.#tailBytes > this.#tailMax) {
      const first = this.#tail[0] as Buffer;
      const over = this.#tailBytes - this.#tailMax;
      if (first.byteLength <= over) {
        this.#tail.shift();
        this.#tailBytes -= first.byteLength;
      } else {
        this.#tail[0] = first.subarray(over);
        this.#tailBytes -= over;
      }
    }
  }

  kept(): KeptOutput {
    const omitted = this.#total - this.#headBytes - this.#tailBytes;
    const head = Buffer.concat(this.#head).toString('utf8');
    const tail = Buffer.concat(this.#tail).toString('utf8');
    const text = omitted > 0 ? `${head}\n[… ${omitted} bytes omitted …]\n${tail}` : head + tail;
    return { text, totalBytes: this.#total, omittedBytes: omitted };
  }
}
