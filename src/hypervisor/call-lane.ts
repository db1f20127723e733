/**
 * A bounded lane for blocking native calls with a deadline.
 *
 * libvirt calls run on libuv's thread pool (4 threads by default, shared with fs, dns and
 * crypto) and cannot be cancelled: a hung hypervisor keeps a thread until it answers. So a call
 * that misses its deadline is answered with a timeout at once, but keeps its slot until the
 * native call really returns. With `concurrency` slots per lane, a dead host can pin at most that
 * many pool threads, and later calls wait here (in JavaScript, not in libuv's queue, where they
 * would also block file I/O) until their own deadline.
 */
import { TimeoutError } from '../util/deadline.js';

interface Waiter {
  readonly start: () => void;
  readonly timer: NodeJS.Timeout | undefined;
}

export class CallLane {
  readonly #concurrency: number;
  #active = 0;
  /** Calls past their deadline whose native call has not returned yet. */
  #stuck = 0;
  readonly #queue: Waiter[] = [];

  /** @param concurrency slots (≥ 1). */
  constructor(concurrency: number) {
    this.#concurrency = Math.max(1, Math.floor(concurrency));
  }

  /** Native calls in flight, including stuck ones. */
  get active(): number {
    return this.#active;
  }

  /** Native calls that missed their deadline and still hold a slot. */
  get stuck(): number {
    return this.#stuck;
  }

  get queued(): number {
    return this.#queue.length;
  }

  /**
   * Runs `fn` when a slot is free and before `deadlineMs` (epoch ms). Rejects with TimeoutError
   * (naming `what`) when the deadline passes first, whether waiting or running; `signal` rejects
   * with its reason the same way. `fn` must return a promise (it may reject).
   */
  run<T>(fn: () => Promise<T>, deadlineMs: number, what: string, signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (signal?.aborted === true) {
        reject(signal.reason as Error);
        return;
      }
      let settled = false;
      let runTimer: NodeJS.Timeout | undefined;
      const finish = (err: unknown, value?: T): void => {
        if (settled) return;
        settled = true;
        clearTimeout(runTimer);
        signal?.removeEventListener('abort', onAbort);
        if (err === undefined) resolve(value as T);
        else reject(toError(err));
      };
      const onAbort = (): void => {
        dequeue();
        finish(signal?.reason ?? new Error('aborted'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });

      const start = (): void => {
        if (waiter.timer !== undefined) clearTimeout(waiter.timer);
        if (settled) {
          this.#next();
          return;
        }
        this.#active++;
        let late = false;
        const remainingMs = deadlineMs - Date.now();
        runTimer = setTimeout(
          () => {
            // Timers run before I/O callbacks in each turn of the event loop: after the loop was
            // busy past the deadline, an answer that arrived in time is still waiting in the poll
            // phase. Decide after it (setImmediate runs after poll), so a busy loop is not
            // mistaken for a slow hypervisor.
            setImmediate(() => {
              if (settled) return;
              late = true;
              this.#stuck++;
              finish(new TimeoutError(`${what} did not answer within its budget`));
            });
          },
          Math.max(0, remainingMs),
        );
        runTimer.unref();
        let p: Promise<T>;
        try {
          p = fn();
        } catch (err) {
          p = Promise.reject(toError(err));
        }
        void p
          .then(
            (v) => finish(undefined, v),
            (e: unknown) => finish(e ?? new Error('rejected without a reason')),
          )
          .finally(() => {
            this.#active--;
            if (late) this.#stuck--;
            this.#next();
          });
      };

      const waitMs = deadlineMs - Date.now();
      const waiter: Waiter = {
        start,
        timer:
          this.#active < this.#concurrency && this.#queue.length === 0
            ? undefined
            : setTimeout(
                () => {
                  dequeue();
                  finish(new TimeoutError(`${what} waited for a free slot past its budget`));
                },
                Math.max(0, waitMs),
              ).unref(),
      };
      const dequeue = (): void => {
        const i = this.#queue.indexOf(waiter);
        if (i >= 0) this.#queue.splice(i, 1);
      };
      if (waiter.timer === undefined) start();
      else this.#queue.push(waiter);
    });
  }

  #next(): void {
    while (this.#active < this.#concurrency && this.#queue.length > 0) {
      const w = this.#queue.shift();
      w?.start();
    }
  }
}

function toError(e: unknown): Error {
  if (e instanceof Error) return e;
  return new Error(typeof e === 'string' ? e : 'rejected without an Error');
}
