/**
 * Reconnect delays: exponential backoff with full jitter (AWS architecture blog, "Exponential
 * Backoff And Jitter"): attempt n waits a uniform random time in [0, min(max, initial * 2^n)].
 * Full jitter spreads a fleet of agents that lost the server at the same instant, so they do not
 * reconnect in lockstep.
 */

export interface BackoffOptions {
  /** Ceiling of the first delay, in ms. Default 500. */
  readonly initialMs?: number;
  /** Ceiling of every delay, in ms. Default 30000. */
  readonly maxMs?: number;
  /** Source of randomness in [0, 1). Default Math.random. */
  readonly random?: () => number;
}

export class Backoff {
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #random: () => number;
  #attempt = 0;

  constructor(opts: BackoffOptions = {}) {
    this.#initialMs = opts.initialMs ?? 500;
    this.#maxMs = Math.max(opts.maxMs ?? 30_000, this.#initialMs);
    this.#random = opts.random ?? Math.random;
  }

  /** Failed attempts since the last reset. */
  get attempts(): number {
    return this.#attempt;
  }

  /** Upper bound of the next delay, in ms. */
  ceilingMs(): number {
    // 2^attempt overflows to Infinity long after it passed maxMs; min() keeps it bounded.
    return Math.min(this.#maxMs, this.#initialMs * 2 ** this.#attempt);
  }

  /** The delay before the next attempt, in ms; counts one more failed attempt. */
  nextDelayMs(): number {
    const ceiling = this.ceilingMs();
    this.#attempt = Math.min(this.#attempt + 1, 64);
    return Math.floor(this.#random() * ceiling);
  }

  /** After a healthy connection: the next delay starts from initialMs again. */
  reset(): void {
    this.#attempt = 0;
  }
}
