/**
 * The fleet bench's heartbeat timetable: every agent beats once per interval at its own phase
 * (its registration time + k × interval), as a real agent's own timer does. One queue ordered by
 * due time serves the whole fleet: all agents share the interval, so an agent that beat goes to
 * the back, due one interval after its beat was due (not after it left: a late wake-up does not
 * shift the agent's phase).
 */
export class HeartbeatSchedule<T> {
  readonly #intervalMs: number;
  #items: T[] = [];
  #dueAt: number[] = [];
  #head = 0;

  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
  }

  /** Agents in the timetable. */
  get size(): number {
    return this.#items.length - this.#head;
  }

  /** When the next agent is due (ms, the caller's clock), or undefined when there is none. */
  get nextDueAt(): number | undefined {
    return this.#dueAt[this.#head];
  }

  /** Adds an agent whose first beat is due at `atMs` (kept in order: never before the agent added last). */
  add(item: T, atMs: number): void {
    this.#items.push(item);
    this.#dueAt.push(Math.max(atMs, this.#dueAt[this.#dueAt.length - 1] ?? -Infinity));
  }

  /** Calls `beat` for every agent due at `nowMs`, in due order, and books each one's next beat. */
  takeDue(nowMs: number, beat: (item: T) => void): void {
    while (this.#head < this.#items.length && (this.#dueAt[this.#head] ?? Infinity) <= nowMs) {
      const item = this.#items[this.#head]!;
      const at = this.#dueAt[this.#head]!;
      this.#head++;
      beat(item);
      this.add(item, at + this.#intervalMs);
    }
    // drop the consumed prefix now and then (amortised O(1) per beat)
    if (this.#head > 4096 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#dueAt = this.#dueAt.slice(this.#head);
      this.#head = 0;
    }
  }
}
