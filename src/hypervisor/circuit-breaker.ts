/**
 * Fail-fast circuit breaker for one hypervisor host.
 *
 *   closed ──(failureThreshold consecutive failures)──► open ──(coolDownMs elapsed)──► half-open
 *     ▲                                                  ▲                                │
 *     └──────────────(any success)───────────────────────┴──────(probe fails)─────────────┘
 *
 * While open, calls are refused at once (the caller answers 503 with Retry-After). After the
 * cool-down exactly one call goes through as the probe; the others are still refused until it
 * settles. Any answer within budget closes the circuit: the host demonstrably answers (an answer
 * that comes after its budget is not reported here, so a host slower than its budget stays open). Successive failed probes lengthen the cool-down (doubling, with ±20 %
 * jitter, up to maxCoolDownMs), so a host that stays down is not hammered.
 *
 * Only availability failures count (timeouts, broken connections); "domain not found" is an
 * answer, hence a success.
 */
import type { CircuitState } from './port.js';

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit. Default 3. */
  failureThreshold?: number;
  /** First cool-down, ms. Default 30 000. */
  coolDownMs?: number;
  /** Longest cool-down after repeated failed probes, ms. Default 300 000. */
  maxCoolDownMs?: number;
  /** Clock (tests). Default Date.now. */
  now?: () => number;
  /** Random source in [0, 1) for the jitter (tests). Default Math.random. */
  random?: () => number;
}

/** What `admit()` decided. */
export type Admission = { readonly ok: true; readonly probe: boolean } | { readonly ok: false; readonly retryAfterMs: number };

export class CircuitBreaker {
  readonly #threshold: number;
  readonly #baseCoolDownMs: number;
  readonly #maxCoolDownMs: number;
  readonly #now: () => number;
  readonly #random: () => number;
  #state: CircuitState = 'closed';
  #failures = 0;
  #openUntil = 0;
  #openings = 0;
  #probeInFlight = false;
  #lastError = '';

  constructor(opts: CircuitBreakerOptions = {}) {
    this.#threshold = opts.failureThreshold ?? 3;
    this.#baseCoolDownMs = opts.coolDownMs ?? 30_000;
    this.#maxCoolDownMs = Math.max(this.#baseCoolDownMs, opts.maxCoolDownMs ?? 300_000);
    this.#now = opts.now ?? Date.now;
    this.#random = opts.random ?? Math.random;
  }

  /** The state now (an open circuit whose cool-down has passed reads as half-open). */
  get state(): CircuitState {
    if (this.#state === 'open' && this.#now() >= this.#openUntil) return 'half-open';
    return this.#state;
  }

  get consecutiveFailures(): number {
    return this.#failures;
  }

  /** The failure that opened (or last hit) the circuit. */
  get lastError(): string {
    return this.#lastError;
  }

  /** ms until a call may be admitted again (0 when it may now). */
  retryAfterMs(): number {
    if (this.#state === 'closed') return 0;
    if (this.#state === 'open' && this.#now() < this.#openUntil) return this.#openUntil - this.#now();
    return this.#probeInFlight ? 1000 : 0;
  }

  /** Asks to make a call. A probe admission must be followed by success() or failure(). */
  admit(): Admission {
    if (this.#state === 'closed') return { ok: true, probe: false };
    if (this.#state === 'open' && this.#now() < this.#openUntil) return { ok: false, retryAfterMs: this.#openUntil - this.#now() };
    // Cool-down over (or half-open): one probe at a time.
    this.#state = 'half-open';
    if (this.#probeInFlight) return { ok: false, retryAfterMs: 1000 };
    this.#probeInFlight = true;
    return { ok: true, probe: true };
  }

  /** The host answered. */
  success(): void {
    this.#state = 'closed';
    this.#failures = 0;
    this.#openings = 0;
    this.#probeInFlight = false;
  }

  /** A call failed for availability reasons (timeout, broken connection). */
  failure(message: string, wasProbe = false): void {
    this.#lastError = message;
    this.#failures++;
    if (wasProbe) this.#probeInFlight = false;
    if (this.#state === 'half-open' ? wasProbe : this.#state === 'closed' && this.#failures >= this.#threshold) this.#open();
  }

  /** A probe ended without telling anything (aborted by its caller): let the next call probe. */
  releaseProbe(): void {
    this.#probeInFlight = false;
  }

  #open(): void {
    const base = Math.min(this.#maxCoolDownMs, this.#baseCoolDownMs * 2 ** this.#openings);
    // The first opening lasts exactly coolDownMs (the documented figure); later ones are jittered.
    const jitter = this.#openings === 0 ? 1 : 0.8 + 0.4 * this.#random();
    this.#openings++;
    this.#state = 'open';
    this.#openUntil = this.#now() + Math.round(Math.min(this.#maxCoolDownMs, base * jitter));
  }
}
