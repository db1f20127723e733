/**
 * One timer for the earliest of many expiry times (leases, grants): `arm(atMs)` with the earliest
 * time still pending, after every change; re-arming for the same time keeps the timer. The timer
 * never keeps the process alive, and a time beyond setTimeout's longest delay (2^31-1 ms, about
 * 24.8 days) fires at that delay, when the owner re-arms for what is then still pending.
 */
export class ExpiryTimer {
  readonly #onDue: () => void;
  readonly #now: () => number;
  #timer: NodeJS.Timeout | undefined;
  #atMs = Infinity;

  /** @param onDue runs when the armed time has come (the owner expires what is due and re-arms). */
  constructor(onDue: () => void, now: () => number = Date.now) {
    this.#onDue = onDue;
    this.#now = now;
  }

  /** Fires at `atMs` (epoch ms); Infinity disarms. */
  arm(atMs: number): void {
    if (atMs === this.#atMs) return;
    this.cancel();
    this.#atMs = atMs;
    if (atMs === Infinity) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#atMs = Infinity;
        this.#onDue();
      },
      Math.min(0x7fffffff, Math.max(0, atMs - this.#now())),
    );
    this.#timer.unref();
  }

  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#atMs = Infinity;
  }
}
