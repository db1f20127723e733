/**
 * Replay buffers lent by a shard to the main thread (actors/replay/replay-buffers.ts keeps them).
 *
 * A replay answer's `bytes` may be a view into a SharedArrayBuffer that the shard reuses for its
 * next replays instead of allocating (and page-faulting) a fresh one of up to 16 MiB each time.
 * Such an answer carries `lease`, a nonzero ticket, and the buffer starts with one Int32 slot:
 *
 *     SharedArrayBuffer: [ kLeaseSlot: int32 ticket | pad | replay bytes ... ]
 *                          0                         kLeaseHeaderBytes
 *
 * The shard stores the ticket there before answering; the buffer is its again once the slot is
 * 0. Whoever takes the answer (src/streaming/output-join.ts) calls {@link releaseReplayBytes}
 * once it no longer reads `bytes` (uWS copies what it writes), on every path. An answer that is
 * never released (dropped after a timeout, read by a test) only costs the shard that buffer: it
 * allocates another one and forgets the lent one after a while, never writing into it again.
 */

/** Int32 index of the ticket in a lent buffer. */
export const kLeaseSlot = 0;
/** Bytes before the replay bytes in a lent buffer (8: keeps the bytes 8-aligned). */
export const kLeaseHeaderBytes = 8;

/** Gives a lent replay buffer back to its shard; a no-op for an answer without `lease`. Idempotent. */
export function releaseReplayBytes(answer: { bytes: Uint8Array; lease?: number }): void {
  const lease = answer.lease;
  if (lease === undefined || lease === 0) return;
  const { buffer, byteOffset } = answer.bytes;
  if (!(buffer instanceof SharedArrayBuffer) || byteOffset < kLeaseHeaderBytes) return;
  Atomics.compareExchange(new Int32Array(buffer, byteOffset - kLeaseHeaderBytes, 1), kLeaseSlot, lease, 0);
}
