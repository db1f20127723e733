import type { MessagePort } from 'node:worker_threads';
import type { WakeMode } from '../../../../actors/ring/sab-ring.js';

/**
 * Deterministic test records for the two-thread ring tests, built the same way in the producer
 * worker and in the checking main thread: [u32 seq][u32 FNV-1a of body] + body (random bytes).
 */

/** mulberry32: a tiny seeded PRNG (uint32 outputs). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

export function fnv1a(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
  return h >>> 0;
}

/** Record `seq` of the stream seeded with `seed`: header part and body part. */
export function makeRecord(seed: number, seq: number, maxBodyBytes: number): [Uint8Array, Uint8Array] {
  const rand = prng(seed ^ Math.imul(seq + 1, 0x9e3779b1));
  const body = new Uint8Array(rand() % (maxBodyBytes + 1));
  for (let i = 0; i < body.length; i++) body[i] = rand() & 0xff;
  const header = new Uint8Array(8);
  const view = new DataView(header.buffer);
  view.setUint32(0, seq, true);
  view.setUint32(4, fnv1a(body), true);
  return [header, body];
}

/** workerData of ring-producer.worker.ts. */
export interface ProducerJob {
  kind: 'sab' | 'port';
  sab?: SharedArrayBuffer;
  /** When the SAB producer wakes the consumer (default `each`). */
  wake?: WakeMode;
  port?: MessagePort;
  capacityBytes: number;
  seed: number;
  count: number;
  maxBodyBytes: number;
}
