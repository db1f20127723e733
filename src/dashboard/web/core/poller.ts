/**
 * Periodic refresh that survives outages: runs `tick` every `intervalMs`; after a failure it
 * waits with jittered backoff instead (and reports the failure), so a restarting server is not
 * hammered. While the page is hidden the interval is stretched (nobody is looking). `kick()` runs
 * a tick now (after an action, or the banner's "Retry now").
 */
import { backoffDelayMs } from '../../model/backoff.js';

export interface PollerOptions {
  intervalMs: number;
  /** Interval multiplier while document.hidden. Default 4. */
  hiddenFactor?: number;
  onError?(err: unknown, attempt: number, nextDelayMs: number): void;
  onSuccess?(): void;
}

export class Poller {
  readonly #tick: (signal: AbortSignal) => Promise<void>;
  readonly #opts: PollerOptions;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running = false;
  #stopped = true;
  #failures = 0;
  #again = false;
  #ctl = new AbortController();

  constructor(tick: (signal: AbortSignal) => Promise<void>, opts: PollerOptions) {
    this.#tick = tick;
    this.#opts = opts;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#ctl = new AbortController();
    this.kick();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#ctl.abort();
  }

  /** Run a tick as soon as possible (coalesced with one in flight). */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    void this.#run();
  }

  get failing(): boolean {
    return this.#failures > 0;
  }

  async #run(): Promise<void> {
    this.#running = true;
    let delayMs: number;
    try {
      await this.#tick(this.#ctl.signal);
      this.#failures = 0;
      this.#opts.onSuccess?.();
      const hidden = typeof document !== 'undefined' && document.hidden;
      delayMs = this.#opts.intervalMs * (hidden ? (this.#opts.hiddenFactor ?? 4) : 1);
    } catch (err) {
      if (this.#stopped) return;
      this.#failures++;
      delayMs = backoffDelayMs(this.#failures - 1, { baseMs: Math.min(1000, this.#opts.intervalMs), maxMs: 15_000 });
      this.#opts.onError?.(err, this.#failures, delayMs);
    } finally {
      this.#running = false;
    }
    if (this.#stopped) return;
    if (this.#again) {
      this.#again = false;
      delayMs = 0;
    }
    this.#timer = setTimeout(() => void this.#run(), delayMs);
  }
}
