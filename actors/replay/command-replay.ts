/**
 * One command's replay state inside its agent actor (per command, in the agent's shard): the
 * ReplayRing of its raw chunks and the text carry of its streams.
 *
 * Nothing is encoded when a chunk arrives: the ring keeps the chunk's raw bytes and its text
 * carry (the 0–3 bytes the stream's decoder held before it, actors/protocol/live-text.ts), and
 * the agent actor sends the same facts to the main thread once (kFrameCommandOutput), where the
 * fanout encodes a live event only when someone subscribes. A replay encodes each chunk's SSE
 * tail from the same facts with the same encoder (actors/protocol/chunk-events.ts), so the
 * replayed text is byte for byte the live text, and keeps the whole event (`id: <cursor>\n`, the
 * `agent_output.replay` head, the tail) in the shard's EventCache, the events of one replay back to
 * back in one arena: the next subscriber's replay of the same chunks is a view of that arena (no
 * copy), otherwise one copy per event into one buffer the thread reuses and lends to the caller
 * (see Pieces.join). The ring is charged for the raw bytes it holds.
 */
import { isMainThread } from 'node:worker_threads';
import { formatOutputCursor, type OutputCursor } from '../protocol/output-cursor.js';
import { replayAgentAfter } from './agent-replay.js';
import { encodeGapSse, encodeStreamEndSse } from '../protocol/output-events.js';
import { chunkHead, encodeChunkTail } from '../protocol/chunk-events.js';
import { LiveText } from '../protocol/live-text.js';
import { encodeSsePublish, kPublishEnd, kPublishGap } from '../protocol/publish-frames.js';
import type { ReplayBudget } from './replay-budget.js';
import { threadReplayBuffers, type ReplayBuffer } from './replay-buffers.js';
import { ReplayRing, type OutputStreamName, type ReplayChunk, type ReplayGap } from './replay-ring.js';

/** A chunk as the agent actor accepted it. `bytes` is valid only during the call. */
export interface LiveChunk {
  seq: number;
  stream: OutputStreamName;
  offset: number;
  timestampMs: number;
  eof: boolean;
  bytes: Uint8Array;
}

/** A replay as ready-to-write SSE bytes (one buffer: no copy across the thread, one socket write). */
export interface ReplayBytes {
  /** The events, concatenated. */
  bytes: Uint8Array;
  /** Set when `bytes` is a buffer lent by this thread: release it (actors/protocol/replay-lease.ts) once written. */
  lease?: number;
  /** Events in `bytes` (chunks and gaps). */
  events: number;
  chunks: number;
  /** Id of the last event; null when there is none. */
  last: string | null;
  /** More retained output follows `last` (ask again after it). */
  more: boolean;
}

/**
 * Buffers that hold encoded events and are never written again once filled (EventCache arenas):
 * a view into one may be handed to the main thread and to uWS as it is, without a copy or a lease.
 */
const immutableArenas = new WeakSet<ArrayBufferLike>();

/**
 * The encoded `agent_output.replay` events of stored chunks (`id:` line, head and tail: all fixed
 * by the chunk and its command), kept after a replay built them so the next replay of the same
 * chunks needs no encoding. One per thread (shard), bounded by bytes: past the bound the oldest
 * events are dropped (and encoded again when asked for). The chunks whose events it holds stay
 * alive with them, also after their ring evicted them.
 *
 * The events a replay encodes are stored together, in order, in one arena (a SharedArrayBuffer in
 * a worker) that is never written again: the next replay of the same chunks finds them contiguous
 * and its answer is a view of the arena (no copy in the shard; the main thread writes the very
 * memory). The bound counts whole arenas: one is charged until its last event is dropped.
 */
export class EventCache {
  readonly maxBytes: number;
  readonly #events = new Map<ReplayChunk, Uint8Array>();
  /** Arena → events of it still cached. */
  readonly #live = new Map<ArrayBufferLike, number>();
  #bytes = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  /** Bytes of the arenas that still hold a cached event. */
  get bytes(): number {
    return this.#bytes;
  }

  get(chunk: ReplayChunk): Uint8Array | undefined {
    return this.#events.get(chunk);
  }

  /** Whether some event of `arena` is still cached (the arena is charged to the bound). */
  holds(arena: ArrayBufferLike): boolean {
    return this.#live.has(arena);
  }

  /**
   * Copies `events` (in order) into one new immutable arena and returns their views in it, in the
   * same order; caches them when the arena fits the bound (else the views are only for this
   * replay). A chunk already cached keeps its event.
   */
  store(events: readonly { chunk: ReplayChunk; event: Uint8Array }[]): Uint8Array[] {
    let total = 0;
    for (const e of events) total += e.event.byteLength;
    const arena = newArena(total);
    const views: Uint8Array[] = [];
    let o = 0;
    for (const e of events) {
      arena.set(e.event, o);
      views.push(arena.subarray(o, o + e.event.byteLength));
      o += e.event.byteLength;
    }
    immutableArenas.add(arena.buffer);
    if (total === 0 || total > this.maxBytes) return views;
    let held = 0;
    for (const [i, e] of events.entries()) {
      if (this.#events.has(e.chunk)) continue;
      this.#events.set(e.chunk, views[i] as Uint8Array);
      held++;
    }
    if (held > 0) {
      this.#live.set(arena.buffer, held);
      this.#bytes += arena.byteLength;
    }
    while (this.#bytes > this.maxBytes) {
      const [oldest, e] = this.#events.entries().next().value as [ReplayChunk, Uint8Array];
      this.#events.delete(oldest);
      const left = (this.#live.get(e.buffer) ?? 1) - 1;
      if (left > 0) this.#live.set(e.buffer, left);
      else {
        this.#live.delete(e.buffer);
        this.#bytes -= e.buffer.byteLength;
      }
    }
    return views;
  }
}

/** A buffer of `n` bytes for an arena: shared in a worker (it crosses to the main thread as it is). */
function newArena(n: number): Buffer {
  return isMainThread ? Buffer.allocUnsafeSlow(n) : Buffer.from(new SharedArrayBuffer(n));
}

/** Default bound of a thread's EventCache: 64 MiB of encoded events (≈ 6,000 replayed 4 KiB chunks). */
export const DEFAULT_EVENT_CACHE_BYTES = 64 * 1024 * 1024;
const threadEvents = new EventCache(DEFAULT_EVENT_CACHE_BYTES);

/**
 * A replay's events in order: cached events (views into arenas), events encoded now (stored in
 * the cache together at the end, in one new arena), gap events.
 */
class Pieces {
  readonly #parts: Uint8Array[] = [];
  /** Events encoded by this replay, with their index in #parts, per cache that keeps them. */
  readonly #fresh = new Map<EventCache, { chunk: ReplayChunk; event: Uint8Array; at: number }[]>();

  bytes(b: Uint8Array): void {
    this.#parts.push(b);
  }

  /** The chunk's event from the cache, or `encode()`d now (cached by {@link join}). */
  event(cache: EventCache, chunk: ReplayChunk, encode: () => Uint8Array): void {
    const cached = cache.get(chunk);
    if (cached !== undefined) return this.bytes(cached);
    const event = encode();
    let fresh = this.#fresh.get(cache);
    if (fresh === undefined) this.#fresh.set(cache, (fresh = []));
    fresh.push({ chunk, event, at: this.#parts.length });
    this.#parts.push(event);
  }

  /**
   * The replay as one buffer. Events encoded now are first stored in one new arena. When every
   * part then lies back to back in one arena (a replay of chunks cached together, the usual warm
   * case) the answer is a view of it: no copy, no lease. Otherwise the parts are copied into one
   * buffer from the thread's ReplayBufferPool (replay-buffers.ts): a reused SharedArrayBuffer
   * lent to the caller (`lease`), or a fresh buffer when none is free.
   */
  join(): ReplayBuffer {
    const parts = this.#parts;
    for (const [cache, fresh] of this.#fresh) {
      const views = cache.store(fresh);
      for (const [i, f] of fresh.entries()) parts[f.at] = views[i] as Uint8Array;
    }
    const first = parts[0];
    let total = 0;
    let contiguous = first !== undefined && immutableArenas.has(first.buffer);
    let end = first === undefined ? 0 : first.byteOffset;
    for (const p of parts) {
      total += p.byteLength;
      if (contiguous && (p.buffer !== first?.buffer || p.byteOffset !== end)) contiguous = false;
      end = p.byteOffset + p.byteLength;
    }
    if (contiguous && first !== undefined) return { bytes: Buffer.from(first.buffer, first.byteOffset, total) };
    const out = threadReplayBuffers.take(total, !isMainThread);
    const buf = out.bytes;
    let o = 0;
    for (const p of parts) {
      buf.set(p, o);
      o += p.byteLength;
    }
    return out;
  }
}

/**
 * The last replay answer of a command that was one view of a cached arena, and what it answered:
 * the same request against an unchanged ring is answered again without walking the ring. The
 * arena is held weakly and used only while the EventCache still charges it, so a memo never keeps
 * memory past the cache's bound.
 */
interface ReplayMemo {
  readonly key: string;
  /** The ring's state it was made from: lastSeq, evicted-through seq (both only grow). */
  readonly lastSeq: number;
  readonly evictedSeq: number;
  readonly arena: WeakRef<ArrayBufferLike>;
  readonly offset: number;
  readonly length: number;
  readonly events: number;
  readonly chunks: number;
  readonly last: string | null;
  readonly more: boolean;
}

export class CommandReplay {
  readonly agentId: string;
  readonly commandId: string;
  readonly ring: ReplayRing;
  readonly #text = new LiveText();
  readonly #events: EventCache;
  #memo: ReplayMemo | undefined;

  constructor(agentId: string, commandId: string, opts: { ringBytes: number; budget?: ReplayBudget; events?: EventCache }) {
    this.agentId = agentId;
    this.commandId = commandId;
    this.#events = opts.events ?? threadEvents;
    this.ring = new ReplayRing(
      commandId,
      opts.budget === undefined ? { maxBytes: opts.ringBytes } : { maxBytes: opts.ringBytes, budget: opts.budget },
    );
  }

  get finished(): boolean {
    return this.ring.finishedAtMs !== undefined;
  }

  /**
   * Stores a chunk (a copy of its bytes) stamped with `clock`; returns its text carry (what the
   * main thread's encoder needs besides the chunk), or null when the ring already holds the seq
   * or was released (nothing stored: the chunk is not published either).
   */
  chunk(c: LiveChunk, clock: number): Uint8Array | null {
    const ring = this.ring;
    if (ring.released || c.seq <= ring.lastSeq) return null;
    const carry = this.#text.next(c.stream, c.offset, c.bytes, c.eof);
    ring.append({
      seq: c.seq,
      stream: c.stream,
      offset: c.offset,
      timestampMs: c.timestampMs,
      eof: c.eof,
      clock,
      carry,
      bytes: c.bytes,
    });
    return carry;
  }

  /** Records lost seqs first..last; returns the output_gap publish payload, or null for nothing new. */
  gap(g: { firstSeq: number; lastSeq: number; lostBytes: number; timestampMs: number }, clock: number): Uint8Array | null {
    const from = this.ring.lastSeq + 1;
    const r = this.ring.appendGap({ firstSeq: g.firstSeq, lastSeq: g.lastSeq, lostBytes: g.lostBytes, timestampMs: g.timestampMs, clock });
    if (r !== 'stored') return null;
    const exact = g.firstSeq === from;
    const gap = {
      agentId: this.agentId,
      commandId: this.commandId,
      fromSeq: from,
      toSeq: g.lastSeq,
      reason: 'agent_dropped' as const,
      clock,
    };
    const frame = encodeGapSse(exact && g.lostBytes > 0 ? { ...gap, lostBytes: g.lostBytes } : gap);
    return encodeSsePublish(kPublishGap, 0, formatOutputCursor(clock, g.lastSeq), frame);
  }

  /** The command ended: marks the ring finished and returns the stream_end publish payload. */
  end(exitCode: number, nowMs: number): Uint8Array {
    this.ring.finish(exitCode, nowMs);
    return encodeSsePublish(kPublishEnd, 0, '', this.endFrame());
  }

  /** The stream_end event of this command (finished, with its exit code). */
  endFrame(): Uint8Array {
    const exitCode = this.ring.exitCode;
    const end = { reason: 'command_finished' as const, agentId: this.agentId, commandId: this.commandId };
    return encodeStreamEndSse(exitCode === undefined ? end : { ...end, exitCode });
  }

  /**
   * Replay as `agent_output.replay` events: after `afterSeq` (a resume: everything retained after
   * it, `limit` chunks per call), or when it is undefined the newest `limit` chunks. Seqs that
   * cannot be delivered come as `agent_output.error` output_gap events in their place.
   */
  replay(req: { afterSeq?: number | undefined; limit: number; stream?: OutputStreamName | undefined }): ReplayBytes {
    const ring = this.ring;
    const key = `${req.afterSeq ?? 'tail'}:${req.limit}:${req.stream ?? ''}`;
    const memo = this.#memo;
    if (
      memo !== undefined &&
      memo.key === key &&
      memo.lastSeq === ring.lastSeq &&
      memo.evictedSeq === ring.evictedThroughSeq &&
      !ring.released
    ) {
      const arena = memo.arena.deref();
      if (arena !== undefined && this.#events.holds(arena))
        return {
          bytes: Buffer.from(arena, memo.offset, memo.length),
          events: memo.events,
          chunks: memo.chunks,
          last: memo.last,
          more: memo.more,
        };
    }
    const pieces = new Pieces();
    const out: ReplayBytes = { bytes: new Uint8Array(0), events: 0, chunks: 0, last: null, more: false };
    let after = req.afterSeq ?? ring.tailAfterSeq(req.limit, req.stream);
    for (;;) {
      const page = ring.replayFrom(after, req.limit - out.chunks, req.stream);
      if (page.gap !== undefined) out.last = this.#gapPiece(pieces, page.gap);
      for (const chunk of page.chunks) this.chunkPiece(pieces, chunk);
      const lastChunk = page.chunks[page.chunks.length - 1];
      if (lastChunk !== undefined) out.last = formatOutputCursor(lastChunk.clock, lastChunk.seq);
      out.events += page.chunks.length + (page.gap === undefined ? 0 : 1);
      out.chunks += page.chunks.length;
      after = page.next.seq;
      if (!page.more) break;
      if (out.chunks >= req.limit) {
        out.more = true;
        break;
      }
    }
    withJoined(out, pieces);
    this.#memo =
      out.lease === undefined && out.bytes.byteLength > 0 && this.#events.holds(out.bytes.buffer)
        ? {
            key,
            lastSeq: ring.lastSeq,
            evictedSeq: ring.evictedThroughSeq,
            arena: new WeakRef(out.bytes.buffer),
            offset: out.bytes.byteOffset,
            length: out.bytes.byteLength,
            events: out.events,
            chunks: out.chunks,
            last: out.last,
            more: out.more,
          }
        : undefined;
    return out;
  }

  /**
   * Appends one stored chunk's `agent_output.replay` event (`id: <cursor>` line, head, then the
   * tail the live encoder makes from the same facts): from the cache, or encoded now.
   */
  chunkPiece(pieces: Pieces, chunk: ReplayChunk): void {
    pieces.event(this.#events, chunk, () => {
      const id = `id: ${formatOutputCursor(chunk.clock, chunk.seq)}\n`;
      const head = chunkHead('replay', this.agentId, this.commandId, chunk.stream);
      const tail = encodeChunkTail({ ...chunk, agentId: this.agentId, commandId: this.commandId });
      const e = Buffer.allocUnsafe(id.length + head.byteLength + tail.byteLength);
      e.write(id, 0, 'latin1');
      e.set(head, id.length);
      e.set(tail, id.length + head.byteLength);
      return e;
    });
  }

  /** Appends an output_gap event; returns its id. */
  #gapPiece(pieces: Pieces, gap: ReplayGap): string {
    pieces.bytes(gapEvent(this.agentId, this.commandId, gap));
    return formatOutputCursor(gap.clock, gap.toSeq);
  }

  /** Retained raw bytes of `stream` in seq order (chat projection). */
  *rawChunks(stream: OutputStreamName): Generator<{ seq: number; bytes: Uint8Array }> {
    let after = 0;
    for (;;) {
      const page = this.ring.replayFrom(after, 1024, stream);
      for (const chunk of page.chunks) yield { seq: chunk.seq, bytes: chunk.bytes };
      after = page.next.seq;
      if (!page.more) return;
    }
  }
}

/** An output_gap event for a replay gap. */
function gapEvent(agentId: string, commandId: string, gap: ReplayGap): Uint8Array {
  const g = { agentId, commandId, fromSeq: gap.fromSeq, toSeq: gap.toSeq, reason: gap.reason, clock: gap.clock };
  return encodeGapSse(gap.lostBytes === undefined ? g : { ...g, lostBytes: gap.lostBytes });
}

/**
 * An agent-scoped resume: the retained output of all of one agent's commands after `after`,
 * merged by clock (agent-replay.ts), as one buffer of events.
 */
export function agentReplay(replays: Iterable<CommandReplay>, after: OutputCursor, limit: number, stream?: OutputStreamName): ReplayBytes {
  const byId = new Map<string, CommandReplay>();
  for (const r of replays) byId.set(r.commandId, r);
  const page = replayAgentAfter(
    [...byId.values()].map((r) => r.ring),
    after,
    limit,
    stream,
  );
  const pieces = new Pieces();
  const out: ReplayBytes = { bytes: new Uint8Array(0), events: 0, chunks: 0, last: null, more: page.more };
  for (const item of page.items) {
    const replay = byId.get(item.commandId) as CommandReplay;
    if (item.gap !== undefined) {
      pieces.bytes(gapEvent(replay.agentId, item.commandId, item.gap));
      out.last = formatOutputCursor(item.gap.clock, item.gap.toSeq);
    } else {
      replay.chunkPiece(pieces, item.chunk);
      out.last = formatOutputCursor(item.chunk.clock, item.chunk.seq);
      out.chunks++;
    }
    out.events++;
  }
  return withJoined(out, pieces);
}

/** `out` with the joined pieces (and their lease). */
function withJoined(out: ReplayBytes, pieces: Pieces): ReplayBytes {
  const joined = pieces.join();
  out.bytes = joined.bytes;
  if (joined.lease !== undefined) out.lease = joined.lease;
  return out;
}

export type { Pieces };
