/**
 * A session's replay buffer: the newest events of its stream (session-dialect.ts SessionEvent,
 * numbered by the hub's counter without gaps), for clients that rejoin with `replay_from`. It
 * lives with the session hub on the main thread, so a join reads it synchronously and no live
 * event can slip between replay and live.
 *
 * Retention (pty-ws.v1 8.2 asks for the last 1000 frames): at least `minFrames` events are kept
 * while they fit in `maxBytes` (default 16 MiB, a hard bound: a session cannot pin unbounded
 * memory), and beyond `minFrames` older events go once the buffer passes `softBytes` (default
 * 1 MiB). Each event costs its payload bytes plus {@link kReplayEntryOverheadBytes}.
 */
import type { SessionEvent } from './session-dialect.js';

export const DEFAULT_REPLAY_MIN_FRAMES = 1000;
export const DEFAULT_REPLAY_SOFT_BYTES = 1024 * 1024;
export const DEFAULT_REPLAY_MAX_BYTES = 16 * 1024 * 1024;
export const kReplayEntryOverheadBytes = 64;

export interface ReplayBufferLimits {
  readonly minFrames?: number;
  readonly softBytes?: number;
  readonly maxBytes?: number;
}

/** What a rejoin with `replay_from` gets. */
export type ReplayRange =
  | { readonly inRange: true; readonly events: readonly SessionEvent[] }
  /** The cursor is older than the oldest event kept, or newer than the newest: its screen is lost. */
  | { readonly inRange: false };

export function costOf(e: SessionEvent): number {
  switch (e.kind) {
    case 'Output':
      return e.data.byteLength + kReplayEntryOverheadBytes;
    case 'Keyframe':
      return e.snapshot.byteLength + kReplayEntryOverheadBytes;
    default:
      return kReplayEntryOverheadBytes * 2;
  }
}

export class ReplayBuffer {
  readonly minFrames: number;
  readonly softBytes: number;
  readonly maxBytes: number;
  #events: SessionEvent[] = [];
  #head = 0;
  #bytes = 0;
  #newest = 0;

  /** `startAfter`: the sequence before the first event (the hub's sequence base). */
  constructor(limits: ReplayBufferLimits = {}, startAfter = 0) {
    this.#newest = startAfter;
    this.minFrames = limits.minFrames ?? DEFAULT_REPLAY_MIN_FRAMES;
    this.softBytes = limits.softBytes ?? DEFAULT_REPLAY_SOFT_BYTES;
    this.maxBytes = limits.maxBytes ?? DEFAULT_REPLAY_MAX_BYTES;
    for (const [k, v] of Object.entries({ minFrames: this.minFrames, softBytes: this.softBytes, maxBytes: this.maxBytes }))
      if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${k} must be a non-negative integer, got ${v}`);
  }

  /** Sequence of the newest event appended (0 before any). */
  get newestSeq(): number {
    return this.#newest;
  }

  /** Sequence of the oldest event kept (newest + 1 when empty). */
  get oldestSeq(): number {
    return this.#events[this.#head]?.sequence ?? this.#newest + 1;
  }

  get size(): number {
    return this.#events.length - this.#head;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** Keeps an event; its sequence must be newest + 1 (the hub's counter has no gaps). */
  append(e: SessionEvent): void {
    if (e.sequence !== this.#newest + 1) throw new RangeError(`sequence ${e.sequence} after ${this.#newest}`);
    this.#newest = e.sequence;
    this.#events.push(e);
    this.#bytes += costOf(e);
    while (this.size > 1 && (this.#bytes > this.maxBytes || (this.size > this.minFrames && this.#bytes > this.softBytes))) {
      const old = this.#events[this.#head] as SessionEvent;
      this.#events[this.#head] = undefined as unknown as SessionEvent;
      this.#head++;
      this.#bytes -= costOf(old);
    }
    if (this.#head > 1024 && this.#head * 2 > this.#events.length) {
      this.#events = this.#events.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Events with sequence > `after`, in order (empty when none). */
  after(after: number): SessionEvent[] {
    const first = Math.max(this.#head, this.#head + (after + 1 - this.oldestSeq));
    return first >= this.#events.length ? [] : this.#events.slice(first);
  }

  /**
   * The events a client that has everything up to `replayFrom` missed: in range when the next one
   * it needs is still kept (or it missed nothing).
   */
  since(replayFrom: number): ReplayRange {
    if (replayFrom > this.#newest || replayFrom + 1 < this.oldestSeq) return { inRange: false };
    return { inRange: true, events: this.after(replayFrom) };
  }
}
