/**
 * The buffers a thread's replays are joined into, reused from one replay to the next.
 *
 * A replay whose events are cached back to back in one arena is a view of it and needs none of
 * these (command-replay.ts, EventCache); the others (events cached by different replays, a moved
 * tail, gaps) are copied into one buffer. A replay of 1,000 × 4 KiB chunks is ≈ 10 MiB of SSE.
 * Joined into a fresh SharedArrayBuffer each time, most of the actor call went to first-touch page faults of the new memory (the kernel
 * zeroing 2,500 pages), and the old buffer waited for a GC. Here a thread keeps a few lendable
 * buffers (actors/protocol/replay-lease.ts): a replay is copied into a free one, whose ticket
 * marks it lent until the main thread has written it to the socket and released it. A replay
 * finds all slots lent, or is larger than `maxSlotBytes`, gets a fresh buffer as before.
 *
 * Bounds: `slots` × at most `maxSlotBytes` (default 2 × 16 MiB) per thread while replays run;
 * a buffer not lent for `idleMs` (30 s) is dropped, so an idle server holds none. A buffer lent
 * for longer than `staleMs` (60 s; the join's call timeout is 10 s) was dropped unreleased by
 * whoever took it: the pool forgets it without ever writing into it again.
 */
import { kLeaseHeaderBytes, kLeaseSlot } from '../protocol/replay-lease.js';

export interface ReplayBufferPoolOptions {
  /** Buffers kept (default 2). */
  slots?: number;
  /** Largest buffer kept, bytes (default 16 MiB); larger replays get a fresh buffer. */
  maxSlotBytes?: number;
  /** A buffer unused this long is dropped, ms (default 30,000). */
  idleMs?: number;
  /** A buffer lent this long is forgotten, ms (default 60,000). */
  staleMs?: number;
  now?: () => number;
}

/** A replay's buffer: `bytes` to fill (exactly the size asked), `lease` its ticket (absent: not lent, a fresh buffer). */
export interface ReplayBuffer {
  bytes: Buffer;
  lease?: number;
}

interface Slot {
  readonly sab: SharedArrayBuffer;
  readonly state: Int32Array;
  /** When it was last lent (ms). */
  lentAtMs: number;
}

export class ReplayBufferPool {
  readonly slots: number;
  readonly maxSlotBytes: number;
  readonly #idleMs: number;
  readonly #staleMs: number;
  readonly #now: () => number;
  readonly #slots: (Slot | undefined)[];
  #ticket = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Replays that found no free slot (or were too large) and got a fresh buffer. */
  fresh = 0;
  /** Replays joined into a buffer an earlier replay used. */
  reused = 0;

  constructor(opts: ReplayBufferPoolOptions = {}) {
    this.slots = opts.slots ?? 2;
    this.maxSlotBytes = opts.maxSlotBytes ?? 16 * 1024 * 1024;
    this.#idleMs = opts.idleMs ?? 30_000;
    this.#staleMs = opts.staleMs ?? 60_000;
    this.#now = opts.now ?? Date.now;
    this.#slots = new Array<Slot | undefined>(this.slots).fill(undefined);
  }

  /** Buffers held now (lent or free). */
  get held(): number {
    return this.#slots.filter((s) => s !== undefined).length;
  }

  /**
   * A buffer of exactly `byteLength` bytes for one replay: a lent pooled one when a slot is free
   * and the size is within `maxSlotBytes`, else a fresh one (shared in a worker, so it crosses
   * to the main thread without a copy; `shared` false: a plain buffer, for the main thread).
   */
  take(byteLength: number, shared: boolean): ReplayBuffer {
    if (byteLength > 0 && byteLength <= this.maxSlotBytes) {
      const nowMs = this.#now();
      let empty = -1;
      for (let i = 0; i < this.#slots.length; i++) {
        const s = this.#slots[i];
        if (s === undefined) {
          if (empty < 0) empty = i;
          continue;
        }
        if (Atomics.load(s.state, kLeaseSlot) !== 0) {
          if (nowMs - s.lentAtMs > this.#staleMs) {
            this.#slots[i] = undefined;
            if (empty < 0) empty = i;
          }
          continue;
        }
        if (s.sab.byteLength - kLeaseHeaderBytes >= byteLength) return this.#lend(s, byteLength, nowMs, true);
        if (empty < 0) empty = i; // free but too small: replaced by a larger one
      }
      if (empty >= 0) {
        // Room for growth, so replays of slowly growing output do not reallocate each time.
        const capacity = Math.min(this.maxSlotBytes, Math.max(64 * 1024, Math.ceil(byteLength * 1.25)));
        const sab = new SharedArrayBuffer(kLeaseHeaderBytes + capacity);
        const slot: Slot = { sab, state: new Int32Array(sab, 0, 1), lentAtMs: nowMs };
        this.#slots[empty] = slot;
        this.#armIdle();
        return this.#lend(slot, byteLength, nowMs, false);
      }
    }
    this.fresh++;
    return { bytes: shared ? Buffer.from(new SharedArrayBuffer(byteLength)) : Buffer.allocUnsafeSlow(byteLength) };
  }

  #lend(s: Slot, byteLength: number, nowMs: number, reused: boolean): ReplayBuffer {
    this.#ticket = this.#ticket >= 0x7fffffff ? 1 : this.#ticket + 1;
    Atomics.store(s.state, kLeaseSlot, this.#ticket);
    s.lentAtMs = nowMs;
    if (reused) this.reused++;
    return { bytes: Buffer.from(s.sab, kLeaseHeaderBytes, byteLength), lease: this.#ticket };
  }

  /** Drops buffers that are free and were not lent for idleMs; re-arms while any is held. */
  dropIdle(): void {
    const nowMs = this.#now();
    for (let i = 0; i < this.#slots.length; i++) {
      const s = this.#slots[i];
      if (s === undefined) continue;
      const lent = Atomics.load(s.state, kLeaseSlot) !== 0;
      if ((!lent && nowMs - s.lentAtMs >= this.#idleMs) || (lent && nowMs - s.lentAtMs > this.#staleMs)) this.#slots[i] = undefined;
    }
    this.#timer = undefined;
    this.#armIdle();
  }

  #armIdle(): void {
    if (this.#timer !== undefined || this.held === 0) return;
    this.#timer = setTimeout(() => this.dropIdle(), this.#idleMs);
    this.#timer.unref();
  }
}

/** This thread's replay buffers. */
export const threadReplayBuffers = new ReplayBufferPool();
