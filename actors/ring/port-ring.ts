/**
 * The MessagePort byte ring: the fallback with the same contract as the SAB ring (an actor system
 * uses it with `ring: 'port'`, SVC_ACTOR_RING=port), and the baseline the ring benchmark compares
 * against. Each record travels as its own transferred
 * ArrayBuffer (one copy, from the parts into that buffer). The bound is by bytes with credits:
 * the producer counts every record it posts (recordBytes(length), the same accounting as the
 * SAB ring) against capacityBytes, and the consumer posts back the bytes it has drained.
 *
 * Wire on the port: producer → consumer `Uint8Array` (one record) or `{ closed: true }`;
 * consumer → producer a number (credited bytes). The two ports may live in different threads.
 *
 * An idle port does not keep its thread alive (it is unref'd); a pending waitReadable or
 * waitWritable does, like the SAB ring's waits.
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { RingConsumer, RingProducer } from './types.js';
import { maxRecordBytesFor, recordBytes, validateCapacityBytes } from './layout.js';

interface CloseMessage {
  closed: true;
}

function isCloseMessage(data: unknown): data is CloseMessage {
  return typeof data === 'object' && data !== null && (data as { closed?: unknown }).closed === true;
}

/** Refs `port` while at least one wait is pending, so an idle ring never holds its thread open. */
class PortKeepAlive {
  #count = 0;
  constructor(readonly port: MessagePort) {
    port.unref();
  }
  acquire(): void {
    if (this.#count++ === 0) this.port.ref();
  }
  release(): void {
    if (--this.#count === 0) this.port.unref();
  }
}

interface WriteWaiter {
  size: number;
  resolve: () => void;
}

/** Producer side of a MessagePort ring. */
export class PortRingProducer implements RingProducer {
  /** Byte budget of records posted and not yet credited back. */
  readonly capacityBytes: number;
  /** Largest payload accepted: capacityBytes - 8 (same as the SAB ring). */
  readonly maxRecordBytes: number;
  readonly #port: MessagePort;
  readonly #keepAlive: PortKeepAlive;
  #inFlightBytes = 0;
  #closed = false;
  #waiters: WriteWaiter[] = [];

  /** `capacityBytes`: a power of two (RangeError otherwise), like the SAB ring's data region. */
  constructor(port: MessagePort, capacityBytes: number) {
    validateCapacityBytes(capacityBytes);
    this.capacityBytes = capacityBytes;
    this.maxRecordBytes = maxRecordBytesFor(capacityBytes);
    this.#port = port;
    port.on('message', (data: unknown) => {
      if (typeof data === 'number') {
        this.#inFlightBytes = Math.max(0, this.#inFlightBytes - data);
        this.#wakeWriters();
      }
    });
    // The consumer's side went away (closed its port or its thread ended): nothing more can be
    // delivered, so behave as closed rather than count bytes nobody will credit.
    port.on('close', () => {
      this.#markClosed();
    });
    this.#keepAlive = new PortKeepAlive(port);
  }

  /** Bytes posted and not yet credited back by the consumer, including per-record overhead. */
  get usedBytes(): number {
    return this.#inFlightBytes;
  }

  tryWrite(parts: Uint8Array | readonly Uint8Array[]): boolean {
    if (this.#closed) throw new Error('ring is closed');
    let length = 0;
    if (parts instanceof Uint8Array) length = parts.byteLength;
    else for (const p of parts) length += p.byteLength;
    if (length > this.maxRecordBytes) {
      throw new RangeError(`record of ${length} bytes exceeds maxRecordBytes ${this.maxRecordBytes}`);
    }
    const size = recordBytes(length);
    if (this.#inFlightBytes + size > this.capacityBytes) return false;
    const record = new Uint8Array(length);
    if (parts instanceof Uint8Array) {
      record.set(parts);
    } else {
      let off = 0;
      for (const p of parts) {
        record.set(p, off);
        off += p.byteLength;
      }
    }
    this.#inFlightBytes += size;
    this.#port.postMessage(record, [record.buffer]);
    return true;
  }

  waitWritable(recordBytesWanted: number, signal?: AbortSignal): Promise<void> {
    if (recordBytesWanted > this.maxRecordBytes) {
      return Promise.reject(new RangeError(`record of ${recordBytesWanted} bytes exceeds maxRecordBytes ${this.maxRecordBytes}`));
    }
    if (signal?.aborted === true) return Promise.reject(signal.reason as Error);
    const size = recordBytes(Math.max(0, recordBytesWanted));
    if (this.#closed || this.#inFlightBytes + size <= this.capacityBytes) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        this.#keepAlive.release();
        reject(signal?.reason as Error);
      };
      const waiter: WriteWaiter = {
        size,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          this.#keepAlive.release();
          resolve();
        },
      };
      this.#waiters.push(waiter);
      this.#keepAlive.acquire();
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  close(): void {
    if (this.#closed) return;
    const msg: CloseMessage = { closed: true };
    this.#port.postMessage(msg);
    this.#markClosed();
  }

  #markClosed(): void {
    this.#closed = true;
    this.#wakeWriters();
  }

  #wakeWriters(): void {
    if (this.#waiters.length === 0) return;
    const still: WriteWaiter[] = [];
    for (const w of this.#waiters) {
      if (this.#closed || this.#inFlightBytes + w.size <= this.capacityBytes) w.resolve();
      else still.push(w);
    }
    this.#waiters = still;
  }
}

/** Consumer side of a MessagePort ring. */
export class PortRingConsumer implements RingConsumer {
  readonly #port: MessagePort;
  readonly #keepAlive: PortKeepAlive;
  /** Queued records from index #first on (compacted when the consumed prefix grows large). */
  #queue: Uint8Array[] = [];
  #first = 0;
  #usedBytes = 0;
  #closed = false;
  #readers: (() => void)[] = [];

  constructor(port: MessagePort) {
    this.#port = port;
    port.on('message', (data: unknown) => {
      if (data instanceof Uint8Array) {
        this.#queue.push(data);
        this.#usedBytes += recordBytes(data.byteLength);
      } else if (isCloseMessage(data)) {
        this.#closed = true;
        // The producer sends nothing after close and needs no more credits.
        port.close();
      }
      this.#wakeReaders();
    });
    // The producer's thread ended without closing: end of stream after what was delivered.
    port.on('close', () => {
      this.#closed = true;
      this.#wakeReaders();
    });
    this.#keepAlive = new PortKeepAlive(port);
  }

  get usedBytes(): number {
    return this.#usedBytes;
  }

  drain(fn: (record: Uint8Array) => void, maxRecords = Infinity): number {
    let n = 0;
    let credit = 0;
    try {
      while (n < maxRecords && this.#first < this.#queue.length) {
        const record = this.#queue[this.#first]!;
        this.#queue[this.#first++] = undefined as unknown as Uint8Array;
        const size = recordBytes(record.byteLength);
        credit += size;
        this.#usedBytes -= size;
        n++;
        fn(record);
      }
    } finally {
      if (this.#first === this.#queue.length) {
        this.#queue = [];
        this.#first = 0;
      } else if (this.#first >= 1024 && this.#first * 2 >= this.#queue.length) {
        this.#queue = this.#queue.slice(this.#first);
        this.#first = 0;
      }
      if (credit > 0 && !this.#closed) this.#port.postMessage(credit);
    }
    return n;
  }

  waitReadable(signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted === true) return Promise.reject(signal.reason as Error);
    if (this.#first < this.#queue.length) return Promise.resolve(true);
    if (this.#closed) return Promise.resolve(false);
    return new Promise<boolean>((resolve, reject) => {
      const onAbort = (): void => {
        this.#readers = this.#readers.filter((r) => r !== reader);
        this.#keepAlive.release();
        reject(signal?.reason as Error);
      };
      const reader = (): void => {
        signal?.removeEventListener('abort', onAbort);
        this.#keepAlive.release();
        resolve(this.#first < this.#queue.length);
      };
      this.#readers.push(reader);
      this.#keepAlive.acquire();
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  #wakeReaders(): void {
    if (this.#readers.length === 0) return;
    const readers = this.#readers;
    this.#readers = [];
    for (const r of readers) r();
  }
}

/**
 * A producer and a consumer joined by a fresh MessageChannel in this thread (tests, benchmarks).
 * To split them across threads, build the classes yourself on the two ports of one channel.
 */
export function createPortRingPair(capacityBytes: number): { producer: PortRingProducer; consumer: PortRingConsumer } {
  const { port1, port2 } = new MessageChannel();
  return { producer: new PortRingProducer(port1, capacityBytes), consumer: new PortRingConsumer(port2) };
}
