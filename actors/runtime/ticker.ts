/**
 * One timer per shard for every actor in it that keeps deadlines (a module is loaded once per
 * shard worker, so `shardTicker` is per shard; in inline mode it is one for the process). Each
 * tick calls every subscriber with the time; subscribers compare it with their own deadlines
 * (an agent's stale and retention timers), so thousands of agents cost one unref'd interval
 * instead of thousands of timers. A component with coarser deadlines runs its own Ticker (the
 * replay retention queue ticks once a second).
 */

/** Something the ticker drives. */
export interface Tickable {
  tick(nowMs: number): void;
}

/** Default tick period (ms): the resolution of the stale and retention deadlines. */
export const kTickMs = 250;

export class Ticker {
  readonly #periodMs: number;
  readonly #now: () => number;
  readonly #subs = new Set<Tickable>();
  #timer: NodeJS.Timeout | undefined;

  constructor(periodMs = kTickMs, now: () => number = Date.now) {
    this.#periodMs = periodMs;
    this.#now = now;
  }

  get size(): number {
    return this.#subs.size;
  }

  add(sub: Tickable): void {
    this.#subs.add(sub);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.tickNow(), this.#periodMs);
      this.#timer.unref();
    }
  }

  delete(sub: Tickable): void {
    this.#subs.delete(sub);
    if (this.#subs.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  /** Runs one tick now (the interval calls this; tests may too). A throwing subscriber does not stop the others. */
  tickNow(): void {
    const now = this.#now();
    for (const sub of [...this.#subs]) {
      try {
        sub.tick(now);
      } catch {
        // Subscribers log their own failures; one bad actor must not starve the shard's timers.
      }
    }
  }
}

/** The shard's ticker. */
export const shardTicker = new Ticker();
