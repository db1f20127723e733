/**
 * Rings between two threads, of either kind: `sab` (the SharedArrayBuffer ring, the fast path)
 * or `port` (the MessagePort ring, the fallback: one transferred buffer per record, no shared
 * memory). The thread that creates a ring keeps one end and hands the other thread a
 * RingHandle in its workerData (list `transfer` in the Worker's transferList); that thread opens
 * its end with openProducer or openConsumer. Both kinds pass one contract suite
 * (test/unit/actors/ring/ring-contract.ts).
 */
import { MessageChannel, type MessagePort, type Transferable } from 'node:worker_threads';
import { validateCapacityBytes } from './layout.js';
import { PortRingConsumer, PortRingProducer } from './port-ring.js';
import { SabRingConsumer, SabRingProducer, allocateSabRing, type WakeMode } from './sab-ring.js';
import type { RingConsumer, RingProducer } from './types.js';

export type RingKind = 'sab' | 'port';

/** What the other thread needs to open its end (structured-cloned; a port must be transferred). */
export type RingHandle = { kind: 'sab'; sab: SharedArrayBuffer } | { kind: 'port'; port: MessagePort; capacityBytes: number };

/**
 * A ring whose producer end stays in this thread. `capacityBytes`: a power of two (RangeError
 * otherwise); `wake` as in openProducer.
 */
export function producerHere(
  kind: RingKind,
  capacityBytes: number,
  wake: WakeMode = 'each',
): { producer: RingProducer; remote: RingHandle; transfer: Transferable[] } {
  if (kind === 'sab') {
    const sab = allocateSabRing(capacityBytes);
    return { producer: new SabRingProducer(sab, wake), remote: { kind, sab }, transfer: [] };
  }
  const { port1, port2 } = new MessageChannel();
  return { producer: new PortRingProducer(port1, capacityBytes), remote: { kind, port: port2, capacityBytes }, transfer: [port2] };
}

/** A ring whose consumer end stays in this thread. `capacityBytes`: a power of two (RangeError otherwise). */
export function consumerHere(
  kind: RingKind,
  capacityBytes: number,
): { consumer: RingConsumer; remote: RingHandle; transfer: Transferable[] } {
  if (kind === 'sab') {
    const sab = allocateSabRing(capacityBytes);
    return { consumer: new SabRingConsumer(sab), remote: { kind, sab }, transfer: [] };
  }
  validateCapacityBytes(capacityBytes);
  const { port1, port2 } = new MessageChannel();
  return { consumer: new PortRingConsumer(port1), remote: { kind, port: port2, capacityBytes }, transfer: [port2] };
}

/**
 * The producer end of a ring another thread created with consumerHere. `wake`: when a SAB
 * ring's consumer is woken (sab-ring.ts, WakeMode); a port ring posts each record at once.
 */
export function openProducer(handle: RingHandle, wake: WakeMode = 'each'): RingProducer {
  return handle.kind === 'sab' ? new SabRingProducer(handle.sab, wake) : new PortRingProducer(handle.port, handle.capacityBytes);
}

/** The consumer end of a ring another thread created with producerHere. */
export function openConsumer(handle: RingHandle): RingConsumer {
  return handle.kind === 'sab' ? new SabRingConsumer(handle.sab) : new PortRingConsumer(handle.port);
}
