/**
 * The global byte budget shared by all replay rings of one shard.
 *
 * Each ring is bounded by its own limit (default 4 MiB); the budget bounds their sum (default
 * 256 MiB), so thousands of commands cannot add up to unbounded memory. When a charge takes the
 * total over `maxBytes`, the budget trims back to a low-water mark (default 7/8 of `maxBytes`) so
 * that the work is done once per `maxBytes / 8` of new output, not on every chunk.
 *
 * Fairness — who loses output: the LARGEST rings, by water-filling. The budget sorts the rings by
 * bytes held and finds the level L such that trimming every ring above L down to L frees enough;
 * each of those rings evicts its own oldest whole chunks until it holds at most L. A command that
 * floods output pays for it; a quiet command's output (often the one a user comes back to look
 * at) survives, and rings of equal size pay equally. The alternative, evicting the globally
 * oldest chunk, lets one chatty command flush every other command's history.
 */

/** Default global replay budget per shard: 256 MiB. */
export const DEFAULT_REPLAY_BUDGET_BYTES = 256 * 1024 * 1024;

/** What the budget needs from a ring (kept minimal so the two files do not import each other). */
export interface BudgetMember {
  /** Bytes the member holds now (as charged). */
  readonly bytes: number;
  /** Evict oldest whole entries until the member holds at most `maxBytes`. */
  trimTo(maxBytes: number): void;
}

export interface ReplayBudgetOptions {
  /** Upper bound of the bytes held by all rings together. Default {@link DEFAULT_REPLAY_BUDGET_BYTES}. */
  maxBytes?: number;
  /** Fraction of maxBytes to trim down to when over budget, in (0, 1]. Default 0.875. */
  lowWaterRatio?: number;
}

/** Shared by every ring of a shard; rings register themselves and report every change in bytes. */
export class ReplayBudget {
  readonly maxBytes: number;
  /** Trims stop once the total is at or below this. */
  readonly lowWaterBytes: number;
  readonly #members = new Set<BudgetMember>();
  #usedBytes = 0;
  #trimming = false;
  #trims = 0;

  constructor(opts: ReplayBudgetOptions = {}) {
    const maxBytes = opts.maxBytes ?? DEFAULT_REPLAY_BUDGET_BYTES;
    const ratio = opts.lowWaterRatio ?? 0.875;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0)
      throw new RangeError(`replay budget maxBytes must be a non-negative integer, got ${maxBytes}`);
    if (!(ratio > 0 && ratio <= 1)) throw new RangeError(`replay budget lowWaterRatio must be in (0, 1], got ${ratio}`);
    this.maxBytes = maxBytes;
    this.lowWaterBytes = Math.floor(maxBytes * ratio);
  }

  /** Bytes held by all registered rings. */
  get usedBytes(): number {
    return this.#usedBytes;
  }

  /** Registered rings. */
  get ringCount(): number {
    return this.#members.size;
  }

  /** How many times the budget had to trim rings (for a metric). */
  get trimCount(): number {
    return this.#trims;
  }

  /** Called by a ring when it is created. */
  register(member: BudgetMember): void {
    this.#members.add(member);
  }

  /** Called by a ring when it is released (after it gave back its bytes). */
  unregister(member: BudgetMember): void {
    this.#members.delete(member);
  }

  /**
   * A ring's holdings changed by `deltaBytes` (positive when it stored, negative when it evicted).
   * Over budget, trims the largest rings (possibly the caller, even down to nothing).
   */
  charge(deltaBytes: number): void {
    this.#usedBytes += deltaBytes;
    if (this.#usedBytes > this.maxBytes && !this.#trimming) this.#trim();
  }

  #trim(): void {
    this.#trimming = true;
    this.#trims++;
    try {
      const need = this.#usedBytes - this.lowWaterBytes;
      const rings = [...this.#members].filter((m) => m.bytes > 0).sort((a, b) => b.bytes - a.bytes);
      const level = waterLevel(
        rings.map((r) => r.bytes),
        need,
      );
      for (const ring of rings) {
        if (ring.bytes <= level) break;
        ring.trimTo(level);
      }
    } finally {
      this.#trimming = false;
    }
  }
}

/**
 * The highest level L (an integer ≥ 0) such that Σ max(0, sizes[i] − L) ≥ need.
 * `sizes` must be sorted in descending order.
 */
export function waterLevel(sizes: readonly number[], need: number): number {
  let sum = 0;
  for (let k = 0; k < sizes.length; k++) {
    sum += sizes[k] ?? 0;
    const level = (sum - need) / (k + 1);
    const next = sizes[k + 1] ?? 0;
    if (level >= next) return Math.max(0, Math.floor(level));
  }
  return 0;
}
