/**
 * What the `ring` scenario's main thread (ring.ts) and its producer worker
 * (ring-producer.worker.ts) share: sizes, messages, and the record stamp both sides check.
 */

/** Payload bytes of every record (one PTY chunk). */
export const RECORD_BYTES = 4096;
/** Data region of the SAB ring, bytes. */
export const RING_BYTES = 1 << 20;
/**
 * postMessage records the producer may have in flight: the bytes the ring holds, so both paths
 * are bounded by the same memory (an unbounded postMessage stream just queues up in the heap).
 */
export const WINDOW_RECORDS = RING_BYTES / RECORD_BYTES;
/** The consumer returns credit to a postMessage producer every this many records. */
export const ACK_EVERY_RECORDS = 32;

export type ProducerMode = 'sab' | 'clone' | 'transfer';

/** Main thread → worker. */
export type ToProducer =
  | { readonly type: 'run'; readonly mode: ProducerMode; readonly durationMs: number; readonly sab: SharedArrayBuffer | null }
  | { readonly type: 'ack'; readonly records: number };

/** Worker → main thread (records themselves arrive as bare Uint8Arrays in the postMessage modes). */
export type FromProducer =
  | { readonly type: 'ready' }
  | { readonly type: 'done'; readonly mode: ProducerMode; readonly records: number; readonly checksum: number }
  | { readonly type: 'error'; readonly message: string };

/** The word stamped into a record's last 4 bytes: a mix of its number, so torn or stale records show. */
export function tailWord(seq: number): number {
  return Math.imul((seq ^ 0x9e3779b9) >>> 0, 0x85ebca6b) >>> 0;
}

function writeU32(rec: Uint8Array, at: number, v: number): void {
  rec[at] = v & 0xff;
  rec[at + 1] = (v >>> 8) & 0xff;
  rec[at + 2] = (v >>> 16) & 0xff;
  rec[at + 3] = v >>> 24;
}

/** Reads a little-endian u32 (no DataView per record). */
export function readU32(rec: Uint8Array, at: number): number {
  return (rec[at]! | (rec[at + 1]! << 8) | (rec[at + 2]! << 16) | (rec[at + 3]! << 24)) >>> 0;
}

/** Stamps record number `seq`: seq in the first 4 bytes, tailWord(seq) in the last 4. */
export function stampRecord(rec: Uint8Array, seq: number): void {
  writeU32(rec, 0, seq);
  writeU32(rec, rec.length - 4, tailWord(seq));
}

/** The running checksum both sides keep over the stamps of the records they wrote / read. */
export function foldChecksum(sum: number, head: number, tail: number): number {
  return (Math.imul(sum, 31) + (head ^ tail)) >>> 0;
}
