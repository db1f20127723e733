/**
 * The byte-ring contract shared by the SharedArrayBuffer ring (the fast path between the main
 * thread and a worker shard) and the MessagePort ring (the fallback, and the baseline the bench
 * compares against). Both pass one contract suite (test/unit/actors/ring/ring-contract.ts).
 *
 * A ring carries opaque records (byte strings) from exactly one producer to exactly one consumer,
 * in order, byte-exact, bounded by bytes. Neither side ever blocks its thread: a full ring makes
 * `tryWrite` return false and the producer awaits `waitWritable`; an empty ring makes the consumer
 * await `waitReadable`. The main thread must never call Atomics.wait.
 */

/** Producer side of a single-producer ring. */
export interface RingProducer {
  /** Bytes of the data region (a power of two). */
  readonly capacityBytes: number;
  /** Largest record this ring can ever accept; a larger one makes tryWrite throw RangeError. */
  readonly maxRecordBytes: number;
  /**
   * Appends one record made of the concatenation of `parts` if it fits now; returns false
   * (writing nothing) when there is not enough free space yet. Throws RangeError when the record
   * is larger than maxRecordBytes, and Error when the ring is closed. `alignLast`: place the
   * record so that its last part lands at the same address modulo 8 as it had (a faster copy of
   * a misaligned source into shared memory; the consumer's view is then unaligned alike). A hint:
   * a ring without shared memory ignores it.
   */
  tryWrite(parts: Uint8Array | readonly Uint8Array[], alignLast?: boolean): boolean;
  /**
   * Resolves once a record of `recordBytes` would fit, or the ring is closed, or the signal
   * aborts (then it rejects with the signal's reason). Never blocks the thread.
   */
  waitWritable(recordBytes: number, signal?: AbortSignal): Promise<void>;
  /** Marks the ring closed: the consumer drains what is there, then sees end of stream. Idempotent. */
  close(): void;
  /** Bytes written and not yet consumed (as far as this side knows), including per-record overhead. */
  readonly usedBytes: number;
}

/** Consumer side of a single-consumer ring. */
export interface RingConsumer {
  /**
   * Hands each available record to `fn`, oldest first, at most `maxRecords` of them; returns how
   * many were consumed. The view passed to `fn` is valid only during the call (the SAB ring hands
   * out a zero-copy view into shared memory and reuses the space afterwards): copy what you keep.
   */
  drain(fn: (record: Uint8Array) => void, maxRecords?: number): number;
  /**
   * Resolves true when at least one record is available, false when the ring is closed and
   * empty. Rejects with the signal's reason when aborted. Never blocks the thread.
   */
  waitReadable(signal?: AbortSignal): Promise<boolean>;
  /** Bytes currently queued (written, not yet consumed), including per-record overhead. */
  readonly usedBytes: number;
}
