/**
 * The arithmetic of the `dashboard` scenario, kept pure so it is unit-tested: which metrics
 * updates the simulated agents sent reached the screen, and how late.
 *
 * An update is one Metrics message of one agent, numbered by its per-agent sequence (1, 2, …).
 * The page reports, per agent, each time its row was repainted with a newer sequence than before
 * (the sequence it then showed, and when). An update counts as shown by the first repaint that
 * showed it or a newer one of the same agent: a row that skips straight to a newer value has
 * still shown the agent's current state (that is per-frame coalescing, not loss).
 */

/** Low bits of memory_used_bytes that carry an update's per-agent sequence number. */
export const kSeqBits = 20;

/** Per agent: the send time (Unix ms) of update `seq` at index `seq - 1`. */
export type SendLog = ReadonlyMap<string, readonly number[]>;

/** Per agent: the repaints, in order, as [sequence shown, Unix ms]. */
export type DisplayLog = ReadonlyMap<string, ReadonlyArray<readonly [seq: number, atMs: number]>>;

export interface UpdateDelivery {
  /** Updates sent with a send time in [fromMs, toMs). */
  readonly sent: number;
  /** Of those, on screen (themselves or a newer update of the same agent) by the end of the log. */
  readonly shown: number;
  /** Of those, shown themselves (not skipped over by a newer one). */
  readonly shownExactly: number;
  /** Of those, shown within `deadlineMs` of being sent. */
  readonly timely: number;
  /** Sent → shown, ms, ascending (one per shown update). */
  readonly latenciesMs: readonly number[];
}

/**
 * Matches the updates sent in [fromMs, toMs) with the repaints that showed them; an update is
 * timely when shown at most `deadlineMs` after it was sent. Display logs must be in time order
 * with non-decreasing sequences per agent (what the page records).
 */
export function matchUpdates(
  sends: SendLog,
  displays: DisplayLog,
  window: { fromMs: number; toMs: number },
  deadlineMs: number,
): UpdateDelivery {
  let sent = 0;
  let shown = 0;
  let shownExactly = 0;
  let timely = 0;
  const latenciesMs: number[] = [];
  for (const [agentId, sentMs] of sends) {
    const shows = displays.get(agentId) ?? [];
    let d = 0;
    for (let i = 0; i < sentMs.length; i++) {
      const at = sentMs[i]!;
      if (at < window.fromMs || at >= window.toMs) continue;
      sent++;
      const seq = i + 1;
      while (d < shows.length && shows[d]![0] < seq) d++;
      const show = shows[d];
      if (show === undefined) continue;
      shown++;
      if (show[0] === seq) shownExactly++;
      // Two processes read the same wall clock; a repaint cannot precede its send.
      const latency = Math.max(0, show[1] - at);
      latenciesMs.push(latency);
      if (latency <= deadlineMs) timely++;
    }
  }
  latenciesMs.sort((a, b) => a - b);
  return { sent, shown, shownExactly, timely, latenciesMs };
}

/** The p-th percentile (0–100, nearest rank) of ascending `sorted`; 0 when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** Ascending copy of `values`. */
export function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/** Rounds to `digits` decimals (result-line figures). */
export function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
