/**
 * Output cursors: the ids of agent-output events (SSE `id:` / `Last-Event-ID`, the WS `cursor`
 * field) and the per-agent clock that makes them resumable across commands.
 *
 * ## Design
 *
 * Every output event of an agent carries two positions:
 *
 * - `seq`, the command's own sequence number from the agent (OutputChunk.seq, 1-based, shared by
 *   stdout/stderr/log, gaps consume seqs). It orders one command.
 * - `clock`, a per-agent monotonic number assigned by the agent's actor when the event arrives
 *   ({@link CursorClock}). It orders all commands of one agent, so a stream filtered by agent
 *   only can resume exactly: it replays, across the agent's rings, every retained event whose
 *   clock is above the cursor's, in clock order.
 *
 * The cursor text is `<clock>-<seq>` (two decimal integers, e.g. `1745000000123456-57`). One
 * format for every stream scope means a frame is encoded ONCE and the same bytes go to
 * command-scoped, agent-scoped and unfiltered subscribers alike (no per-scope re-encoding).
 * A command-scoped stream (query has command_id) resumes by `seq`; an agent-scoped one by
 * `clock`. An unfiltered (fleet-wide) stream resumes each agent by `clock` too; the clocks of
 * different agents come from the same host time but are not ordered against each other, so
 * fleet-wide resume is best-effort near the cursor (events of other agents delivered late by
 * their shard may be skipped). Use an agent or command filter for exact resume.
 *
 * The clock is `max(previous + 1, Date.now() * 1000)`: strictly increasing within an actor, and a
 * new incarnation of the actor (after a shard restart) starts above any cursor the previous one
 * handed out — unless that one averaged more than 1,000 events per millisecond — so a stale
 * cursor reads as "before everything retained" (reported as a gap) rather than "after
 * everything" (which would skip output silently). Values stay below 2^53 until the year 2255.
 */

/** Assigns per-agent clock values (see the module comment). One per agent actor. */
export class CursorClock {
  #last: number;
  readonly #nowMs: () => number;

  /** @param nowMs time source in Unix ms (tests pass a fake one); default `Date.now`. */
  constructor(nowMs: () => number = Date.now) {
    this.#nowMs = nowMs;
    this.#last = 0;
  }

  /** The next clock value: greater than every value returned before. */
  next(): number {
    const t = this.#nowMs() * 1000;
    this.#last = t > this.#last ? t : this.#last + 1;
    return this.#last;
  }

  /** The last value handed out (0 before the first). */
  get last(): number {
    return this.#last;
  }
}

/** A parsed output cursor. */
export interface OutputCursor {
  /** Per-agent clock of the event. */
  readonly clock: number;
  /** The command's seq of the event (for a gap event, the last seq it covers). */
  readonly seq: number;
}

/** `<clock>-<seq>`: the text form used as SSE id and WS `cursor`. */
export function formatOutputCursor(clock: number, seq: number): string {
  return `${clock}-${seq}`;
}

const kCursorPattern = /^(\d{1,16})-(\d{1,16})$/;

/**
 * Parses `<clock>-<seq>`; null for anything else (caller answers 400). Both parts are
 * non-negative safe integers; `0-0` is the position before everything.
 */
export function parseOutputCursor(text: string): OutputCursor | null {
  const m = kCursorPattern.exec(text.trim());
  if (m === null) return null;
  const clock = Number(m[1]);
  const seq = Number(m[2]);
  if (!Number.isSafeInteger(clock) || !Number.isSafeInteger(seq)) return null;
  return { clock, seq };
}
