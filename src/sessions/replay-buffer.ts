/**
 * A session's hot replay: its most recent output frames, bounded by bytes, for clients that join
 * or rejoin (pty.join_session replay_from). It lives with the session hub on the main thread, so
 * a join reads it synchronously and no live frame can slip between replay and live.
 *
 * This is a terminal-sized window (default 256 KiB: many screens of a full-screen program, which
 * redraws anyway), not the command's full output: the agent-output SSE replay (actors' replay
 * rings) keeps more. Each entry costs its bytes plus {@link kReplayEntryOverheadBytes}.
 * Seqs must increase; a seq at or below the newest is a duplicate and is ignored.
 */

export const DEFAULT_SESSION_REPLAY_BYTES = 256 * 1024;
export const kReplayEntryOverheadBytes = 64;

export interface ReplayFrame {
  readonly seq: number;
  readonly data: Uint8Array;
}

export interface ReplaySlice {
  /** Clear the screen before drawing: the client has no cursor, or output after it is gone. */
  readonly reset: boolean;
  readonly frames: readonly ReplayFrame[];
  /** First seq replayed (the cursor asked for when nothing is replayed). */
  readonly fromSeq: number;
  /** Newest seq retained (0 when none). */
  readonly toSeq: number;
}

export class ReplayBuffer {
  readonly maxBytes: number;
  #frames: ReplayFrame[] = [];
  #head = 0;
  #bytes = 0;
  #newest = 0;

  constructor(maxBytes: number = DEFAULT_SESSION_REPLAY_BYTES) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new RangeError(`maxBytes must be a non-negative integer, got ${maxBytes}`);
    this.maxBytes = maxBytes;
  }

  get newestSeq(): number {
    return this.#newest;
  }

  /** Oldest retained seq (0 when empty). */
  get oldestSeq(): number {
    return this.#frames[this.#head]?.seq ?? 0;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get isEmpty(): boolean {
    return this.#head === this.#frames.length;
  }

  /** Keeps a frame (the caller must not modify `data` afterwards). False for a duplicate seq. */
  append(seq: number, data: Uint8Array): boolean {
    if (!(seq > this.#newest)) return false;
    this.#newest = seq;
    const cost = data.byteLength + kReplayEntryOverheadBytes;
    if (cost > this.maxBytes) {
      // Larger than the whole window: nothing older survives it, and it is not kept either.
      this.#frames = [];
      this.#head = 0;
      this.#bytes = 0;
      return true;
    }
    this.#frames.push({ seq, data });
    this.#bytes += cost;
    while (this.#bytes > this.maxBytes) {
      const old = this.#frames[this.#head] as ReplayFrame;
      this.#frames[this.#head] = undefined as unknown as ReplayFrame;
      this.#head++;
      this.#bytes -= old.data.byteLength + kReplayEntryOverheadBytes;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#frames.length) {
      this.#frames = this.#frames.slice(this.#head);
      this.#head = 0;
    }
    return true;
  }

  /** What a client joining with cursor `replayFrom` (first seq it wants; undefined: none) gets. */
  since(replayFrom: number | undefined): ReplaySlice {
    const all = this.#frames.slice(this.#head);
    if (replayFrom === undefined) return { reset: true, frames: all, fromSeq: all[0]?.seq ?? this.#newest + 1, toSeq: this.#newest };
    if (replayFrom > this.#newest) return { reset: false, frames: [], fromSeq: replayFrom, toSeq: this.#newest };
    const oldest = all[0]?.seq;
    if (oldest === undefined || replayFrom < oldest) {
      // Output between the cursor and what is retained is gone (evicted, or from before a re-attach).
      return { reset: true, frames: all, fromSeq: oldest ?? replayFrom, toSeq: this.#newest };
    }
    const frames = all.filter((f) => f.seq >= replayFrom);
    return { reset: false, frames, fromSeq: frames[0]?.seq ?? replayFrom, toSeq: this.#newest };
  }
}
