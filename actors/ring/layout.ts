/**
 * The one shared-memory layout of the SAB byte ring (actors/ring/sab-ring.ts). One
 * SharedArrayBuffer holds one single-producer/single-consumer ring:
 *
 * ```
 *  byte 0                              64                              128            128 + capacityBytes
 *  ┌───────────────────────────────────┬───────────────────────────────┬──────────────────────────┐
 *  │ control line 0 (producer writes)  │ control line 1 (consumer)     │ data region              │
 *  │ i32[0]  kMagic                    │ i32[16] kTail                 │ capacityBytes, a power   │
 *  │ i32[1]  kCapacityBytes            │ i32[17] kConsumerWaiting      │ of two, records below    │
 *  │ i32[2]  kHead                     │ (rest unused)                 │                          │
 *  │ i32[3]  kClosed                   │                               │                          │
 *  │ i32[4]  kProducerWaiting          │                               │                          │
 *  └───────────────────────────────────┴───────────────────────────────┴──────────────────────────┘
 * ```
 *
 * Each side writes only its own 64-byte line (kMagic/kCapacityBytes are written once at
 * allocation), so the two threads do not false-share a cache line on every record.
 *
 * kHead and kTail are free-running byte counters modulo 2^32 (stored as int32, compared with
 * `>>> 0`): the position in the data region is `counter & (capacityBytes - 1)` and the bytes in
 * use are `(head - tail) >>> 0`, which is unambiguous (0 = empty, capacityBytes = full) because
 * capacityBytes ≤ 2^30. The producer alone stores kHead, the consumer alone stores kTail.
 *
 * A record at position p (a multiple of kRecordAlignBytes):
 *
 * ```
 *   p         p+4          p+8       p+8+skip                 p+8+skip+length   p + recordBytes(skip + length)
 *   ┌─────────┬────────────┬─────────┬────────────────────────┬─────────────────┐
 *   │ u32 len │ u32 skip   │ 0-7 B   │ payload (len bytes)    │ pad to 8 bytes  │ next record …
 *   └─────────┴────────────┴─────────┴────────────────────────┴─────────────────┘
 * ```
 *
 * The length is in the machine's byte order (both sides are threads of one process). The header
 * is 8 bytes, not 4, so a payload starts 8-byte aligned (skip 0): V8 copies between typed arrays
 * whose offsets agree mod 8 with wide moves and byte by byte otherwise (relaxed_memmove, for
 * shared memory), which made a misaligned 4 KiB copy about 7x slower (measured by `npm run bench
 * -- ring`; see the ring scenario's note). A producer may skip 0-7 bytes (`tryWrite(parts,
 * alignLast)`) so that the record's last part lands at the same address modulo 8 as its source:
 * a gRPC message sits 5 bytes into its buffer (after its length prefix), and copying it to an
 * aligned payload went byte by byte.
 *
 * Wrap: a record never splits across the end of the data region, so the consumer can always
 * hand out one contiguous zero-copy view. When a record does not fit before the end, the producer
 * writes the length kPadMarker at p (there are always ≥ 8 bytes left, since p and the capacity
 * are multiples of 8), advances kHead to the next lap's position 0, and writes the record there.
 * The consumer skips a pad by advancing kTail to the end of the lap. A record of maxRecordBytes
 * (capacityBytes - 8) occupies the whole region.
 *
 * Publication: the producer writes length and payload with plain stores, then publishes with
 * `Atomics.store(kHead)`; the consumer reads kHead with `Atomics.load` before reading the
 * record, and publishes the freed space with `Atomics.store(kTail)` only after the view it
 * handed out is no longer used. Sequentially consistent atomics order the plain accesses.
 *
 * Waking: a side that must wait sets its waiting flag (kConsumerWaiting / kProducerWaiting) to 1
 * before every wait, re-reads the other side's counter, and then waits with `Atomics.waitAsync`
 * on that counter's current value; the other side stores its counter first and reads the flag
 * second, and when it is set, lowers it (`Atomics.exchange`, so only one notifier wins) and calls
 * `Atomics.notify`, which wakes every waiter of that counter. Either the waiter sees the new
 * counter or the notifier sees the flag (both orders are seq-cst), and waitAsync itself returns
 * at once when the value has already changed. One more interleaving: the notifier can lower the
 * flag between the waiter's raise and its registration, for a counter change the waiter has
 * already seen (it consumed that record, or a deferred wake-up, WakeMode in sab-ring.ts, came
 * late): its notify finds no waiter, and the waiter would then sleep with its flag down, so that
 * no later change woke it until its wait slice ran out (kWaitSliceMs: a 100 ms stall, seen once
 * in CI and once per few runs of a paced ping-pong with deferred wake-ups). So after registering,
 * the waiter reads its flag once more and, finding it lowered, releases its wait at once and
 * raises the flag again; a lowering after that re-read is followed by a notify that finds the
 * registered waiter. A busy stream pays no notify per record, and a woken side that has not run
 * yet is not notified again for each record published meanwhile.
 * Close sets kClosed and notifies kHead unconditionally; a consumer re-reads kClosed after its
 * waiter is registered, so a close between its check and its wait is not lost either.
 * `Atomics.wait` (blocking) is never used.
 */

/** Int32 slot: constant kRingMagic, to reject a SharedArrayBuffer that is not a ring. */
export const kMagic = 0;
/** Int32 slot: bytes of the data region (written once at allocation). */
export const kCapacityBytes = 1;
/** Int32 slot: free-running count of bytes the producer has published (mod 2^32). */
export const kHead = 2;
/** Int32 slot: 1 once the producer has closed the ring. */
export const kClosed = 3;
/** Int32 slot: 1 while the producer waits for space (the consumer then notifies kTail). */
export const kProducerWaiting = 4;
/** Int32 slot: free-running count of bytes the consumer has released (mod 2^32). */
export const kTail = 16;
/** Int32 slot: 1 while the consumer waits for records (the producer then notifies kHead). */
export const kConsumerWaiting = 17;

/** Bytes before the data region (two 64-byte cache lines of control words). */
export const kControlBytes = 128;
/** Int32 slots in the control region. */
export const kControlSlots = kControlBytes / 4;
/** 'RING' in ASCII. */
export const kRingMagic = 0x52494e47;

/** Bytes of the per-record header: u32 length + u32 padding (keeps payloads 8-byte aligned). */
export const kRecordHeaderBytes = 8;
/** Record start positions are multiples of this (lets a payload hold aligned 4-byte words). */
export const kRecordAlignBytes = 8;
/** Largest skip before a payload (the record header's second word, masked with it). */
export const kMaxSkipBytes = 7;
/** Length value that marks padding up to the end of the data region. */
export const kPadMarker = 0xffffffff;

/** Smallest data region accepted (bytes). */
export const kMinCapacityBytes = 64;
/** Largest data region accepted (bytes); keeps `(head - tail) >>> 0` unambiguous. */
export const kMaxCapacityBytes = 2 ** 30;

/** Bytes a record of `payloadBytes` occupies in the data region: header + payload, rounded up to 8. */
export function recordBytes(payloadBytes: number): number {
  return (kRecordHeaderBytes + payloadBytes + kRecordAlignBytes - 1) & ~(kRecordAlignBytes - 1);
}

/** Largest payload a ring of `capacityBytes` accepts (the record then fills the whole region). */
export function maxRecordBytesFor(capacityBytes: number): number {
  return capacityBytes - kRecordHeaderBytes;
}

/** Throws RangeError unless `capacityBytes` is a power of two within [kMinCapacityBytes, kMaxCapacityBytes]. */
export function validateCapacityBytes(capacityBytes: number): void {
  if (
    !Number.isInteger(capacityBytes) ||
    capacityBytes < kMinCapacityBytes ||
    capacityBytes > kMaxCapacityBytes ||
    (capacityBytes & (capacityBytes - 1)) !== 0
  ) {
    throw new RangeError(
      `ring capacityBytes must be a power of two between ${kMinCapacityBytes} and ${kMaxCapacityBytes}, got ${capacityBytes}`,
    );
  }
}
