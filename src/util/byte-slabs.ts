/**
 * ByteSlabs: bytes that arrive in many small chunks (a command's output), collected into slabs
 * of their own so that the whole can move to a worker thread without ever being joined on the
 * main thread. Joining 32 MiB there costs about 40 ms of blocked event loop (copy and page
 * faults, native-bench `jobs`); copying each chunk as it arrives costs microseconds.
 *
 * Every slab is an ArrayBuffer of its own (Buffer.allocUnsafeSlow, never a slice of Buffer's
 * shared pool), so it can be transferred; a chunk is copied, never kept.
 */

/** Default slab size (1 MiB): large enough to keep the slab count low, small enough to waste little. */
export const DEFAULT_SLAB_BYTES = 1024 * 1024;

export class ByteSlabs {
  readonly #slabBytes: number;
  readonly #full: Uint8Array[] = [];
  #current: Buffer | undefined;
  #used = 0;
  #total = 0;

  /** @param slabBytes size of each slab (default 1 MiB, at least 1) */
  constructor(slabBytes = DEFAULT_SLAB_BYTES) {
    if (!Number.isInteger(slabBytes) || slabBytes < 1) throw new RangeError(`slabBytes must be an integer ≥ 1, got ${slabBytes}`);
    this.#slabBytes = slabBytes;
  }

  /** Copies `chunk` in. */
  push(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.byteLength) {
      if (this.#current === undefined || this.#used === this.#current.byteLength) {
        if (this.#current !== undefined) this.#full.push(this.#current);
        this.#current = Buffer.allocUnsafeSlow(this.#slabBytes);
        this.#used = 0;
      }
      const n = Math.min(chunk.byteLength - at, this.#current.byteLength - this.#used);
      this.#current.set(chunk.subarray(at, at + n), this.#used);
      this.#used += n;
      at += n;
    }
    this.#total += chunk.byteLength;
  }

  /** Bytes pushed so far. */
  get byteLength(): number {
    return this.#total;
  }

  /**
   * The bytes, in order, as views that each cover the start of an ArrayBuffer of its own (safe to
   * transfer). The collector is empty afterwards.
   */
  take(): Uint8Array[] {
    const out = this.#full.splice(0);
    if (this.#current !== undefined && this.#used > 0) out.push(this.#current.subarray(0, this.#used));
    this.#current = undefined;
    this.#used = 0;
    this.#total = 0;
    return out;
  }
}

/** `parts` joined into one Buffer over an ArrayBuffer of its own (transferable). */
export function joinOwned(parts: readonly Uint8Array[]): Buffer {
  let total = 0;
  for (const p of parts) total += p.byteLength;
  const out = Buffer.allocUnsafeSlow(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
