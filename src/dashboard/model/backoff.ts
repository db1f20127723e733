/**
 * Reconnect delays for the dashboard's live connections (WebSocket, SSE, polling after a
 * failure): jittered exponential backoff, so many open dashboards do not reconnect in lock-step
 * after a server restart. Full jitter over the upper half: delay ∈ [cap/2, cap) with
 * cap = min(maxMs, baseMs · 2^attempt).
 */

export interface BackoffOptions {
  /** First delay's cap (ms). Default 500. */
  baseMs?: number;
  /** Largest delay (ms). Default 15 000. */
  maxMs?: number;
}

/** Delay before reconnect attempt `attempt` (0 for the first); `random` is in [0, 1). */
export function backoffDelayMs(attempt: number, opts: BackoffOptions = {}, random: () => number = Math.random): number {
  const base = opts.baseMs ?? 500;
  const max = opts.maxMs ?? 15_000;
  const cap = Math.min(max, base * 2 ** Math.min(Math.max(0, attempt), 30));
  return Math.round(cap / 2 + (cap / 2) * Math.min(0.999_999, Math.max(0, random())));
}
