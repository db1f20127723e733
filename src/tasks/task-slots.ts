/**
 * How many tasks run their stages at once: a FIFO semaphore. A task holds a slot from staging
 * until it ends (clone, VM, command, artifacts); tasks beyond the limit stay `pending` in
 * submission order. Waiting is abortable (a cancelled or timed-out pending task leaves the line).
 */

/** Default number of tasks past `pending` at once. */
export const DEFAULT_MAX_CONCURRENT_TASKS = 8;

export class TaskSlots {
  readonly max: number;
  #inUse = 0;
  readonly #waiting: Array<{ grant: () => void }> = [];

  constructor(max: number = DEFAULT_MAX_CONCURRENT_TASKS) {
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`max must be a positive integer, got ${max}`);
    this.max = max;
  }

  /** Slots taken. */
  get inUse(): number {
    return this.#inUse;
  }

  /** Tasks waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * Resolves with the release function once a slot is free (release is idempotent). Rejects with
   * the signal's reason when it aborts first.
   */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted === true) return Promise.reject(signal.reason as Error);
    if (this.#inUse < this.max && this.#waiting.length === 0) {
      this.#inUse++;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve, reject) => {
      const entry = {
        grant: (): void => {
          signal?.removeEventListener('abort', onAbort);
          this.#inUse++;
          resolve(this.#releaser());
        },
      };
      const onAbort = (): void => {
        const i = this.#waiting.indexOf(entry);
        if (i >= 0) this.#waiting.splice(i, 1);
        reject(signal?.reason as Error);
      };
      this.#waiting.push(entry);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  #releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#inUse--;
      this.#waiting.shift()?.grant();
    };
  }
}
