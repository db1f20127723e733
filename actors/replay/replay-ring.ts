/**
 * One command's recent output, bounded by bytes, for replay to new and resuming subscribers.
 *
 * The ring holds an ordered run of entries: output chunks and gap markers (seqs the agent
 * reported as dropped, OutputGap, or that never arrived). Together with the evicted prefix they
 * account for every seq from 1 to `lastSeq`, so a replay can always say exactly which seqs it
 * cannot deliver instead of skipping them silently.
 *
 * Bounds: `maxBytes` per ring (default 4 MiB) and the shard's shared {@link ReplayBudget}
 * (default 256 MiB). Every entry is charged its payload plus {@link kEntryOverheadBytes}, so a
 * flood of empty or one-byte chunks is bounded too. Eviction removes whole entries, oldest first.
 *
 * Storage: each stored chunk is copied once. A small ring copies each chunk into an array of its
 * own exact size: thousands of mostly idle rings share one budget, and a slab per ring would
 * either be charged for its slack (penalising small rings) or not (breaking the bound). A busy
 * ring (a limit of at least {@link kSlabMinRingBytes} and {@link kSlabBytes} held) copies its
 * chunks into slabs of kSlabBytes instead, and is charged for each whole slab while it holds one
 * (its chunks then cost only their overhead): a streaming command allocates one array per 64 KiB
 * instead of one per chunk, which spared the shard's allocator, its garbage collector and the
 * collector's helper threads most of their work per chunk (flamegraphs/ingest-after-2.md). A
 * chunk lands in its slab at the same offset modulo 8 as its source, so the copy out of a shard
 * ring (shared memory, which V8 copies word by word only when both sides are aligned alike) is
 * not done byte by byte. A slab whose chunks are all evicted goes back to the thread's pool
 * (at most {@link kSlabPoolSlabs}, not charged to any ring) for the next slab a ring opens, so a
 * steady stream allocates nothing: allocating 100 MB/s of fresh arrays made V8 run a full
 * collection every 64 MB of them. Hence the rule of ReplayChunk.bytes: valid while its chunk is
 * retained (replay-types.ts).
 *
 * Finished commands: the owner calls `finish(exitCode)` and releases the ring (`release()`)
 * after its retention period (default {@link DEFAULT_REPLAY_RETENTION_MS}); the timer is the
 * owner's (`finishedAtMs` says when).
 */
import type { OutputCursor } from '../protocol/output-cursor.js';
import type { ReplayBudget } from './replay-budget.js';
import type { AppendResult, ChunkInput, OutputStreamName, ReplayChunk, ReplayPage } from './replay-types.js';

export type { AppendResult, ChunkInput, OutputStreamName, ReplayChunk, ReplayGap, ReplayPage } from './replay-types.js';

/** Default per-command replay limit: 4 MiB. */
export const DEFAULT_REPLAY_RING_BYTES = 4 * 1024 * 1024;
/** Default time a finished command's ring is kept before release: 5 minutes. */
export const DEFAULT_REPLAY_RETENTION_MS = 5 * 60 * 1000;
/** Bytes charged per entry beyond its payload (objects and array headers; measured ≈ 310 on Node 20 x64). */
export const kEntryOverheadBytes = 320;
/** Size of a busy ring's slabs. */
export const kSlabBytes = 64 * 1024;
/** Rings with a smaller limit never use slabs (a slab would be a large part of what they may hold). */
export const kSlabMinRingBytes = 16 * kSlabBytes;
/** Chunks above this size get an array of their own, in slab mode too. */
const kSlabMaxChunkBytes = kSlabBytes / 4;
/** Emptied slabs kept per thread for reuse (2 MiB). */
export const kSlabPoolSlabs = 32;
const slabPool: Uint8Array[] = [];

function takeSlab(): Uint8Array {
  return slabPool.pop() ?? new Uint8Array(kSlabBytes);
}

function returnSlab(bytes: Uint8Array): void {
  if (slabPool.length < kSlabPoolSlabs) slabPool.push(bytes);
}

/** One slab: the chunks stored in it, so it is uncharged when the last of them is evicted. */
interface Slab {
  readonly bytes: Uint8Array;
  used: number;
  chunks: number;
}

interface GapMarker {
  readonly kind: 'gap';
  readonly seq: number;
  readonly toSeq: number;
  readonly clock: number;
  readonly timestampMs: number;
  readonly lostBytes: number | undefined;
}

type Entry = ReplayChunk | GapMarker;

export interface ReplayRingOptions {
  /** Per-ring limit in bytes (payload + overhead). Default {@link DEFAULT_REPLAY_RING_BYTES}. */
  maxBytes?: number;
  /** The shard's shared budget; none = only the per-ring limit applies. */
  budget?: ReplayBudget;
}

const kCompactAt = 1024;
const NO_CARRY = new Uint8Array(0);

export class ReplayRing {
  readonly commandId: string;
  readonly maxBytes: number;
  readonly #budget: ReplayBudget | undefined;
  #entries: Entry[] = [];
  #head = 0;
  #bytes = 0;
  #lastSeq = 0;
  #lastClock = 0;
  #evictedSeq = 0;
  #evictedClock = 0;
  #evictedEntries = 0;
  #finishedAtMs: number | undefined;
  #exitCode: number | undefined;
  #released = false;
  /** Slabs holding retained chunks, oldest first; chunks go into the last one. */
  #slabs: Slab[] = [];

  constructor(commandId: string, opts: ReplayRingOptions = {}) {
    const maxBytes = opts.maxBytes ?? DEFAULT_REPLAY_RING_BYTES;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0)
      throw new RangeError(`replay ring maxBytes must be a non-negative integer, got ${maxBytes}`);
    this.commandId = commandId;
    this.maxBytes = maxBytes;
    this.#budget = opts.budget;
    this.#budget?.register(this);
  }

  /** Bytes held (payloads + per-entry overhead). */
  get bytes(): number {
    return this.#bytes;
  }
  /** Retained entries (chunks and gap markers). */
  get entryCount(): number {
    return this.#entries.length - this.#head;
  }
  /** Highest seq accounted for (received, reported dropped, or evicted); 0 before any. */
  get lastSeq(): number {
    return this.#lastSeq;
  }
  /** Clock of the newest entry; 0 before any. */
  get lastClock(): number {
    return this.#lastClock;
  }
  /** Every seq ≤ this is no longer held (0 when nothing was evicted). */
  get evictedThroughSeq(): number {
    return this.#evictedSeq;
  }
  /** Entries evicted so far (for a metric). */
  get evictedEntries(): number {
    return this.#evictedEntries;
  }
  get finishedAtMs(): number | undefined {
    return this.#finishedAtMs;
  }
  get exitCode(): number | undefined {
    return this.#exitCode;
  }
  get released(): boolean {
    return this.#released;
  }

  /**
   * Store a chunk. A seq at or below `lastSeq` is a duplicate (the agent resends after a
   * reconnect) and is ignored; a seq that jumps records the missing seqs as an agent_dropped gap.
   * A chunk larger than the limits is accounted for and evicted at once (replay reports it).
   * RangeError when `clock` does not increase (the owner's bug, not the agent's).
   */
  append(chunk: ChunkInput): AppendResult {
    if (this.#released) return 'released';
    const { seq } = chunk;
    if (!Number.isSafeInteger(seq) || seq < 1) return 'invalid';
    if (seq <= this.#lastSeq) return 'duplicate';
    const clock = this.#nextClock(chunk.clock ?? seq);
    if (seq > this.#lastSeq + 1) {
      this.#push({ kind: 'gap', seq: this.#lastSeq + 1, toSeq: seq - 1, clock, timestampMs: chunk.timestampMs, lostBytes: undefined }, 0);
    }
    const { copy, charged } = this.#store(chunk.bytes);
    const entry: ReplayChunk = {
      kind: 'chunk',
      seq,
      stream: chunk.stream,
      offset: chunk.offset,
      timestampMs: chunk.timestampMs,
      clock,
      eof: chunk.eof === true,
      carry: chunk.carry ?? NO_CARRY,
      bytes: copy,
    };
    this.#push(entry, charged);
    return 'stored';
  }

  /**
   * Copies `src` into the ring's storage; returns the copy and the bytes to charge for it (its
   * length, or in a slab: nothing, or the whole slab when it opened one).
   */
  #store(src: Uint8Array): { copy: Uint8Array; charged: number } {
    const n = src.byteLength;
    if (this.maxBytes < kSlabMinRingBytes || n > kSlabMaxChunkBytes || (this.#bytes < kSlabBytes && this.#slabs.length === 0)) {
      const copy = new Uint8Array(n);
      copy.set(src);
      return { copy, charged: n };
    }
    let slab = this.#slabs.at(-1);
    let charged = 0;
    // Same offset modulo 8 as the source: V8 copies shared memory word by word only then.
    let at = slab === undefined ? 0 : alignLike(slab.used, src.byteOffset);
    if (slab === undefined || at + n > kSlabBytes) {
      slab = { bytes: takeSlab(), used: 0, chunks: 0 };
      this.#slabs.push(slab);
      charged = kSlabBytes;
      at = alignLike(0, src.byteOffset);
    }
    const copy = slab.bytes.subarray(at, at + n);
    copy.set(src);
    slab.used = at + n;
    slab.chunks++;
    return { copy, charged };
  }

  /**
   * Record an OutputGap: seqs `firstSeq..lastSeq` are lost (`lostBytes` in all). The part at or
   * below `lastSeq` of the ring is ignored; seqs between the ring's lastSeq and `firstSeq` are
   * folded into the gap (then `lostBytes` is no longer exact and is dropped).
   */
  appendGap(gap: { firstSeq: number; lastSeq: number; lostBytes?: number; timestampMs: number; clock?: number }): AppendResult {
    if (this.#released) return 'released';
    if (!Number.isSafeInteger(gap.firstSeq) || !Number.isSafeInteger(gap.lastSeq) || gap.firstSeq < 1 || gap.lastSeq < gap.firstSeq)
      return 'invalid';
    if (gap.lastSeq <= this.#lastSeq) return 'duplicate';
    const from = this.#lastSeq + 1;
    const exact = gap.firstSeq === from && gap.lostBytes !== undefined && Number.isSafeInteger(gap.lostBytes) && gap.lostBytes >= 0;
    const clock = this.#nextClock(gap.clock ?? gap.lastSeq);
    this.#push(
      { kind: 'gap', seq: from, toSeq: gap.lastSeq, clock, timestampMs: gap.timestampMs, lostBytes: exact ? gap.lostBytes : undefined },
      0,
    );
    return 'stored';
  }

  /** The command ended (CommandResult). Output that still arrives is kept. */
  finish(exitCode: number, nowMs: number = Date.now()): void {
    if (this.#finishedAtMs !== undefined) return;
    this.#finishedAtMs = nowMs;
    this.#exitCode = exitCode;
  }

  /** Drop everything and leave the budget; later appends return 'released'. Idempotent. */
  release(): void {
    if (this.#released) return;
    this.trimTo(0);
    this.#released = true;
    this.#entries = [];
    for (const slab of this.#slabs) returnSlab(slab.bytes);
    this.#slabs = [];
    this.#head = 0;
    this.#budget?.unregister(this);
  }

  /** Evict oldest whole entries until at most `maxBytes` are held (used by the budget too). */
  trimTo(maxBytes: number): void {
    const freed = this.#evict(maxBytes);
    if (freed > 0) this.#budget?.charge(-freed);
  }

  /**
   * Replay what follows `afterSeq` (0 = from the start): first the gap right after it, if any
   * (evicted, or a dropped range), then up to `limit` chunks (of `stream` only, when given) until
   * the next gap. Chunks of other streams are passed over but still advance `next`. Page through
   * with `next.seq` while `more` is true.
   */
  replayFrom(afterSeq: number, limit: number, stream?: OutputStreamName): ReplayPage {
    if (!(limit >= 1)) throw new RangeError(`replay limit must be at least 1, got ${limit}`);
    let after = Math.max(0, Math.floor(afterSeq));
    const page: ReplayPage = { chunks: [], next: { clock: 0, seq: after }, more: false };
    if (after >= this.#lastSeq) return page;
    const entries = this.#entries;
    if (after < this.#evictedSeq) {
      page.gap = { fromSeq: after + 1, toSeq: this.#evictedSeq, reason: 'evicted', clock: this.#evictedClock };
      after = this.#evictedSeq;
      page.next = { clock: this.#evictedClock, seq: after };
    }
    let i = this.#indexAfterSeq(after);
    const first = entries[i];
    if (page.gap === undefined && first !== undefined && first.kind === 'gap') {
      const fromSeq = Math.max(first.seq, after + 1);
      page.gap = { fromSeq, toSeq: first.toSeq, reason: 'agent_dropped', clock: first.clock };
      if (fromSeq === first.seq && first.lostBytes !== undefined) page.gap.lostBytes = first.lostBytes;
      page.next = { clock: first.clock, seq: first.toSeq };
      i++;
    }
    let last: Entry | undefined;
    for (; i < entries.length; i++) {
      const e = entries[i] as Entry;
      if (e.kind === 'gap') break;
      if (stream === undefined || e.stream === stream) {
        if (page.chunks.length >= limit) break;
        page.chunks.push(e);
      }
      last = e;
    }
    if (last !== undefined) page.next = { clock: last.clock, seq: last.seq };
    page.more = i < entries.length;
    return page;
  }

  /**
   * Replay what follows an agent-scoped cursor (clock order, see actors/protocol/output-cursor.ts).
   * Exact when the cursor is before this command's first entry or at/after its evicted prefix;
   * when it falls inside the evicted prefix the gap's `fromSeq` is a lower bound (1): the ring no
   * longer knows which of the evicted seqs the subscriber had.
   */
  replayAfter(cursor: OutputCursor, limit: number, stream?: OutputStreamName): ReplayPage {
    return this.replayFrom(this.seqAtCursor(cursor), limit, stream);
  }

  /** The highest seq this ring knows to be at or before `cursor` (0 when none or unknown). */
  seqAtCursor(cursor: OutputCursor): number {
    const entries = this.#entries;
    let lo = this.#head;
    let hi = entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const e = entries[mid] as Entry;
      if (e.clock < cursor.clock || (e.clock === cursor.clock && endSeq(e) <= cursor.seq)) lo = mid + 1;
      else hi = mid;
    }
    if (lo > this.#head) return endSeq(entries[lo - 1] as Entry);
    if (
      this.#evictedSeq > 0 &&
      (this.#evictedClock < cursor.clock || (this.#evictedClock === cursor.clock && this.#evictedSeq <= cursor.seq))
    ) {
      return this.#evictedSeq;
    }
    return 0;
  }

  /**
   * Where a "last `limit` chunks" replay starts: the afterSeq to pass to replayFrom. When the
   * ring holds fewer matching chunks because some were evicted, the start reaches back into the
   * evicted seqs (at most `limit` seqs before the newest), so the replay reports that gap.
   */
  tailAfterSeq(limit: number, stream?: OutputStreamName): number {
    if (!(limit >= 1)) throw new RangeError(`replay limit must be at least 1, got ${limit}`);
    const entries = this.#entries;
    let count = 0;
    for (let i = entries.length - 1; i >= this.#head; i--) {
      const e = entries[i] as Entry;
      if (e.kind === 'chunk' && (stream === undefined || e.stream === stream) && ++count === limit) return e.seq - 1;
    }
    if (this.#evictedSeq === 0) return 0;
    return Math.max(0, this.#evictedSeq - (limit - count));
  }

  #nextClock(clock: number): number {
    if (!(clock > this.#lastClock))
      throw new RangeError(`replay ring ${this.commandId}: clock ${clock} does not follow ${this.#lastClock}`);
    return clock;
  }

  #push(e: Entry, chargedBytes: number): void {
    this.#entries.push(e);
    this.#lastSeq = endSeq(e);
    this.#lastClock = e.clock;
    const cost = chargedBytes + kEntryOverheadBytes;
    this.#bytes += cost;
    // The ring's own limit first, so the budget only sees (and trims for) the net change.
    const freed = this.#bytes > this.maxBytes ? this.#evict(this.maxBytes) : 0;
    this.#budget?.charge(cost - freed);
  }

  /** Evicts oldest entries down to `maxBytes`; returns the bytes freed (the caller tells the budget). */
  #evict(maxBytes: number): number {
    let freed = 0;
    const entries = this.#entries;
    while (this.#bytes > maxBytes && this.#head < entries.length) {
      const e = entries[this.#head] as Entry;
      entries[this.#head] = undefined as unknown as Entry; // let the bytes go before compaction
      this.#head++;
      const cost = this.#costOf(e);
      this.#bytes -= cost;
      freed += cost;
      this.#evictedSeq = endSeq(e);
      this.#evictedClock = e.clock;
      this.#evictedEntries++;
    }
    if (this.#head >= kCompactAt && this.#head * 2 >= entries.length) {
      this.#entries = entries.slice(this.#head);
      this.#head = 0;
    }
    return freed;
  }

  /** Index of the first retained entry whose last seq is above `seq`. */
  #indexAfterSeq(seq: number): number {
    const entries = this.#entries;
    let lo = this.#head;
    let hi = entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (endSeq(entries[mid] as Entry) <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** What evicting `e` frees: its overhead and its own array, or its slab once the slab's last chunk goes. */
  #costOf(e: Entry): number {
    if (e.kind !== 'chunk') return kEntryOverheadBytes;
    const slab = this.#slabs[0];
    if (slab === undefined || e.bytes.buffer !== slab.bytes.buffer) return e.bytes.byteLength + kEntryOverheadBytes;
    if (--slab.chunks > 0) return kEntryOverheadBytes;
    this.#slabs.shift();
    returnSlab(slab.bytes);
    return kSlabBytes + kEntryOverheadBytes;
  }
}

function endSeq(e: Entry): number {
  return e.kind === 'chunk' ? e.seq : e.toSeq;
}

/** The first offset ≥ `at` with the same remainder modulo 8 as `like`. */
function alignLike(at: number, like: number): number {
  return at + ((like - at) & 7);
}
