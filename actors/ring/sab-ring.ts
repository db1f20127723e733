/**
 * The SharedArrayBuffer byte ring: the fast path between the main thread and a worker shard.
 * One producer thread, one consumer thread; layout, publication order and wake-up protocol are
 * described in ./layout.ts. Neither side ever blocks its thread (Atomics.waitAsync only), and
 * the hot path allocates nothing but the consumer's per-record subarray view.
 */
import type { RingConsumer, RingProducer } from './types.js';
import {
  kCapacityBytes,
  kClosed,
  kConsumerWaiting,
  kControlBytes,
  kControlSlots,
  kHead,
  kMagic,
  kMaxSkipBytes,
  kPadMarker,
  kProducerWaiting,
  kRecordHeaderBytes,
  kRingMagic,
  kTail,
  maxRecordBytesFor,
  recordBytes,
  validateCapacityBytes,
} from './layout.js';
import { waitForChange } from './wait-async.js';

/**
 * Allocates and initialises the SharedArrayBuffer of one ring with a data region of
 * `capacityBytes` (a power of two, 64 B … 1 GiB; RangeError otherwise). Hand it to one
 * SabRingProducer and one SabRingConsumer, in any threads.
 */
export function allocateSabRing(capacityBytes: number): SharedArrayBuffer {
  validateCapacityBytes(capacityBytes);
  const sab = new SharedArrayBuffer(kControlBytes + capacityBytes);
  const ctrl = new Int32Array(sab, 0, kControlSlots);
  ctrl[kCapacityBytes] = capacityBytes;
  Atomics.store(ctrl, kMagic, kRingMagic);
  return sab;
}

interface RingViews {
  ctrl: Int32Array;
  bytes: Uint8Array;
  words: Uint32Array;
  capacityBytes: number;
}

function openRing(sab: SharedArrayBuffer): RingViews {
  if (!(sab instanceof SharedArrayBuffer) || sab.byteLength < kControlBytes) {
    throw new TypeError('not a ring SharedArrayBuffer (use allocateSabRing)');
  }
  const ctrl = new Int32Array(sab, 0, kControlSlots);
  const capacityBytes = Atomics.load(ctrl, kCapacityBytes);
  if (Atomics.load(ctrl, kMagic) !== kRingMagic || sab.byteLength !== kControlBytes + capacityBytes) {
    throw new TypeError('not a ring SharedArrayBuffer (use allocateSabRing)');
  }
  return {
    ctrl,
    bytes: new Uint8Array(sab, kControlBytes, capacityBytes),
    words: new Uint32Array(sab, kControlBytes, capacityBytes / 4),
    capacityBytes,
  };
}

/**
 * After storing the counter at `counterSlot`: wakes the other side if its flag says it waits.
 * The flag is lowered by whoever notifies, so the other side is notified once per wait, not on
 * every record it has not yet woken up for (a woken thread takes a while to run, and a busy
 * producer published dozens of records meanwhile, each paying a futex call for no waiter).
 */
function wakeIfWaiting(ctrl: Int32Array, flagSlot: number, counterSlot: number): void {
  if (Atomics.load(ctrl, flagSlot) !== 0 && Atomics.exchange(ctrl, flagSlot, 0) !== 0) Atomics.notify(ctrl, counterSlot);
}

function partsLength(parts: Uint8Array | readonly Uint8Array[]): number {
  if (parts instanceof Uint8Array) return parts.byteLength;
  let n = 0;
  for (const p of parts) n += p.byteLength;
  return n;
}

/**
 * When the producer wakes a waiting consumer:
 * - `each`: at the first record published while it waits (lowest latency, one wake-up per wait);
 * - `microtask`: once the producer's current synchronous run is over (a worker's drain loop
 *   emits many records in one run; the consumer then wakes once for all of them);
 * - `turn`: in the check phase of the producer's event-loop turn (setImmediate), so everything
 *   published by one turn's I/O callbacks (many gRPC messages of one socket read, each delivered
 *   in its own microtask) costs one wake-up.
 * A deferred wake-up is flushed at once when the producer waits for room or closes. Every
 * wake-up is a futex call here and a context switch for the other thread; on a busy pipeline
 * they were one per few records on both threads (native-bench "ingest").
 */
export type WakeMode = 'each' | 'microtask' | 'turn';

/** Producer side of a SAB ring. Use from exactly one thread. */
export class SabRingProducer implements RingProducer {
  /** Bytes of the data region. */
  readonly capacityBytes: number;
  /** Largest payload accepted: capacityBytes - 8. */
  readonly maxRecordBytes: number;
  readonly #ctrl: Int32Array;
  readonly #bytes: Uint8Array;
  readonly #words: Uint32Array;
  readonly #mask: number;
  /** Our copy of kHead (we are its only writer). */
  #head: number;
  #closed = false;
  /** Pending waitWritable calls in this thread; kProducerWaiting is lowered when the last ends. */
  #waiters = 0;
  readonly #wake: WakeMode;
  /** A record was published since the last wake-up check (deferred modes). */
  #wakeOwed = false;
  #wakeScheduled = false;
  readonly #flushWakeBound = (): void => {
    this.#wakeScheduled = false;
    this.#flushWake();
  };

  constructor(sab: SharedArrayBuffer, wake: WakeMode = 'each') {
    this.#wake = wake;
    const v = openRing(sab);
    this.#ctrl = v.ctrl;
    this.#bytes = v.bytes;
    this.#words = v.words;
    this.capacityBytes = v.capacityBytes;
    this.maxRecordBytes = maxRecordBytesFor(v.capacityBytes);
    this.#mask = v.capacityBytes - 1;
    this.#head = Atomics.load(v.ctrl, kHead);
    this.#closed = Atomics.load(v.ctrl, kClosed) !== 0;
  }

  /** Bytes queued (written, not yet released by the consumer), including per-record overhead. */
  get usedBytes(): number {
    return (this.#head - Atomics.load(this.#ctrl, kTail)) >>> 0;
  }

  tryWrite(parts: Uint8Array | readonly Uint8Array[], alignLast = false): boolean {
    if (this.#closed) throw new Error('ring is closed');
    const length = partsLength(parts);
    if (length > this.maxRecordBytes) {
      throw new RangeError(`record of ${length} bytes exceeds maxRecordBytes ${this.maxRecordBytes}`);
    }
    let skip = 0;
    if (alignLast && !(parts instanceof Uint8Array) && parts.length > 0) {
      const last = parts[parts.length - 1]!;
      skip = (last.byteOffset - (length - last.byteLength)) & 7;
      if (skip + length > this.maxRecordBytes) skip = 0;
    }
    let size = recordBytes(skip + length);
    if (!this.#makeRoom(size)) {
      // Without the skip it may fit (waitWritable promised room for the record, not for its skip).
      if (skip === 0 || !this.#makeRoom(recordBytes(length))) return false;
      skip = 0;
      size = recordBytes(length);
    }
    const pos = this.#head & this.#mask;
    this.#words[pos >>> 2] = length;
    this.#words[(pos >>> 2) + 1] = skip;
    let off = pos + kRecordHeaderBytes + skip;
    if (parts instanceof Uint8Array) {
      this.#bytes.set(parts, off);
    } else {
      for (const p of parts) {
        this.#bytes.set(p, off);
        off += p.byteLength;
      }
    }
    this.#publish((this.#head + size) | 0);
    return true;
  }

  async waitWritable(recordBytesWanted: number, signal?: AbortSignal): Promise<void> {
    if (recordBytesWanted > this.maxRecordBytes) {
      throw new RangeError(`record of ${recordBytesWanted} bytes exceeds maxRecordBytes ${this.maxRecordBytes}`);
    }
    const size = recordBytes(Math.max(0, recordBytesWanted));
    const ctrl = this.#ctrl;
    // The consumer must hear of what is already there, or it may never make the room we wait for.
    this.#flushWake();
    for (;;) {
      signal?.throwIfAborted();
      if (this.#closed || this.#makeRoom(size)) return;
      this.#waiters++;
      // Raised before every wait, not only the first: the consumer lowers it when it notifies.
      Atomics.store(ctrl, kProducerWaiting, 1);
      try {
        // Re-read kTail after raising the flag: either we see the consumer's progress here, or
        // the consumer sees our flag and notifies.
        const tail = Atomics.load(ctrl, kTail);
        if (this.#makeRoom(size)) return;
        // A flag lowered after we raised it and before the wait was registered: its notify missed us (layout.ts).
        await waitForChange(ctrl, kTail, tail, signal, () => this.#closed || Atomics.load(ctrl, kProducerWaiting) === 0);
      } finally {
        if (--this.#waiters === 0) Atomics.store(ctrl, kProducerWaiting, 0);
      }
    }
  }

  /** Wakes the consumer now if a deferred wake-up is owed (never in mode `each`). */
  #flushWake(): void {
    if (!this.#wakeOwed) return;
    this.#wakeOwed = false;
    wakeIfWaiting(this.#ctrl, kConsumerWaiting, kHead);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#wakeOwed = false;
    Atomics.store(this.#ctrl, kClosed, 1);
    // Unconditional: the consumer re-reads kClosed after registering its waiter (layout.ts).
    Atomics.notify(this.#ctrl, kHead);
    // Wakes this thread's own pending waitWritable calls, which then see #closed.
    Atomics.notify(this.#ctrl, kTail);
  }

  /**
   * True when a record of `size` ring bytes fits contiguously at the head now. When it would
   * have to wrap and the rest of the lap is free, writes the pad first (invisible to the
   * consumer) so the record can start at position 0 once enough is drained.
   */
  #makeRoom(size: number): boolean {
    const tail = Atomics.load(this.#ctrl, kTail);
    let free = this.capacityBytes - ((this.#head - tail) >>> 0);
    if (free < size) return false;
    const pos = this.#head & this.#mask;
    const untilEnd = this.capacityBytes - pos;
    if (size <= untilEnd) return true;
    this.#words[pos >>> 2] = kPadMarker;
    this.#publish((this.#head + untilEnd) | 0);
    free -= untilEnd;
    return free >= size;
  }

  #publish(head: number): void {
    this.#head = head;
    Atomics.store(this.#ctrl, kHead, head);
    if (this.#wake === 'each') {
      wakeIfWaiting(this.#ctrl, kConsumerWaiting, kHead);
      return;
    }
    this.#wakeOwed = true;
    if (this.#wakeScheduled) return;
    this.#wakeScheduled = true;
    if (this.#wake === 'microtask') queueMicrotask(this.#flushWakeBound);
    else setImmediate(this.#flushWakeBound);
  }
}

/** Consumer side of a SAB ring. Use from exactly one thread. */
export class SabRingConsumer implements RingConsumer {
  /** Bytes of the data region. */
  readonly capacityBytes: number;
  readonly #ctrl: Int32Array;
  readonly #bytes: Uint8Array;
  readonly #words: Uint32Array;
  readonly #mask: number;
  /** Our copy of kTail (we are its only writer). */
  #tail: number;
  /** Pending waitReadable calls in this thread; kConsumerWaiting is lowered when the last ends. */
  #waiters = 0;

  constructor(sab: SharedArrayBuffer) {
    const v = openRing(sab);
    this.#ctrl = v.ctrl;
    this.#bytes = v.bytes;
    this.#words = v.words;
    this.capacityBytes = v.capacityBytes;
    this.#mask = v.capacityBytes - 1;
    this.#tail = Atomics.load(v.ctrl, kTail);
  }

  get usedBytes(): number {
    return (Atomics.load(this.#ctrl, kHead) - this.#tail) >>> 0;
  }

  drain(fn: (record: Uint8Array) => void, maxRecords = Infinity): number {
    const ctrl = this.#ctrl;
    const words = this.#words;
    let tail = this.#tail;
    const start = tail;
    let head = Atomics.load(ctrl, kHead);
    let n = 0;
    try {
      while (n < maxRecords) {
        if (tail === head) {
          head = Atomics.load(ctrl, kHead);
          if (tail === head) break;
        }
        const pos = tail & this.#mask;
        const length = words[pos >>> 2]!;
        if (length === kPadMarker) {
          tail = (tail + this.capacityBytes - pos) | 0;
          Atomics.store(ctrl, kTail, tail);
          continue;
        }
        const skip = words[(pos >>> 2) + 1]! & kMaxSkipBytes;
        const off = pos + kRecordHeaderBytes + skip;
        // Count the record as consumed even when fn throws, or it would be redelivered forever.
        n++;
        try {
          fn(this.#bytes.subarray(off, off + length));
        } finally {
          // Release the space only after fn is done with the zero-copy view.
          tail = (tail + recordBytes(skip + length)) | 0;
          Atomics.store(ctrl, kTail, tail);
        }
      }
    } finally {
      this.#tail = tail;
      if (tail !== start) wakeIfWaiting(ctrl, kProducerWaiting, kTail);
    }
    return n;
  }

  async waitReadable(signal?: AbortSignal): Promise<boolean> {
    const ctrl = this.#ctrl;
    for (;;) {
      signal?.throwIfAborted();
      if (this.#hasRecord()) return true;
      if (Atomics.load(ctrl, kClosed) !== 0) return this.#hasRecord();
      this.#waiters++;
      // Raised before every wait, not only the first: the producer lowers it when it notifies.
      Atomics.store(ctrl, kConsumerWaiting, 1);
      try {
        const head = Atomics.load(ctrl, kHead);
        if (head !== this.#tail || Atomics.load(ctrl, kClosed) !== 0) continue;
        // A flag lowered after we raised it and before the wait was registered: its notify missed us (layout.ts).
        await waitForChange(
          ctrl,
          kHead,
          head,
          signal,
          () => Atomics.load(ctrl, kClosed) !== 0 || Atomics.load(ctrl, kConsumerWaiting) === 0,
        );
      } finally {
        if (--this.#waiters === 0) Atomics.store(ctrl, kConsumerWaiting, 0);
      }
    }
  }

  /** True when a record (not just a pad) is available; consumes a pad at the tail if there is one. */
  #hasRecord(): boolean {
    const head = Atomics.load(this.#ctrl, kHead);
    if (head === this.#tail) return false;
    const pos = this.#tail & this.#mask;
    if (this.#words[pos >>> 2] !== kPadMarker) return true;
    this.#tail = (this.#tail + this.capacityBytes - pos) | 0;
    Atomics.store(this.#ctrl, kTail, this.#tail);
    wakeIfWaiting(this.#ctrl, kProducerWaiting, kTail);
    return head !== this.#tail;
  }
}
