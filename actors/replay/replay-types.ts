/** The shapes a replay ring takes and returns (replay-ring.ts). */
import type { OutputStreamName } from '../protocol/agent-frames.js';
import type { OutputCursor } from '../protocol/output-cursor.js';

export type { OutputStreamName };

/** A chunk as handed to `ReplayRing.append`. `bytes` is copied; the caller may reuse it. */
export interface ChunkInput {
  /** OutputChunk.seq, ≥ 1. */
  seq: number;
  stream: OutputStreamName;
  /** Byte offset of bytes[0] within this stream of the command. */
  offset: number;
  timestampMs: number;
  bytes: Uint8Array;
  /** Last chunk of this stream. */
  eof?: boolean;
  /** Per-agent clock (CursorClock); default: the seq. Must increase from entry to entry. */
  clock?: number;
  /** What the stream's text decoder held before this chunk (0–3 bytes, kept as given); default none. */
  carry?: Uint8Array;
}

/**
 * A retained chunk. Read-only: shared by every replay that returns it. `bytes` is valid while the
 * chunk is retained: a busy ring reuses the memory of evicted chunks (replay-ring.ts, slabs), so
 * read or copy it before the ring can evict (synchronously, in the call that got the chunk).
 */
export interface ReplayChunk {
  readonly kind: 'chunk';
  readonly seq: number;
  readonly stream: OutputStreamName;
  readonly offset: number;
  readonly timestampMs: number;
  readonly clock: number;
  readonly eof: boolean;
  /** What the stream's text decoder held before this chunk (actors/protocol/live-text.ts). */
  readonly carry: Uint8Array;
  readonly bytes: Uint8Array;
}

/** Seqs a replay cannot deliver, reported before the chunks that follow them. */
export interface ReplayGap {
  fromSeq: number;
  toSeq: number;
  /** evicted: the ring no longer holds them; agent_dropped: the server never received them. */
  reason: 'evicted' | 'agent_dropped';
  /** Known only for gaps the agent reported whole. */
  lostBytes?: number;
  /** Clock of the gap's position (for the event id `<clock>-<toSeq>`). */
  clock: number;
}

/** One page of a replay: an optional gap, then contiguous chunks. */
export interface ReplayPage {
  gap?: ReplayGap;
  chunks: ReplayChunk[];
  /** Where the next page starts: pass `next.seq` to replayFrom (or `next` to replayAfter). */
  next: OutputCursor;
  /** True when entries after `next` are retained. */
  more: boolean;
}

export type AppendResult = 'stored' | 'duplicate' | 'invalid' | 'released';
