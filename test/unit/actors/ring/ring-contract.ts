/**
 * The byte-ring contract (actors/ring/types.ts), run against every implementation: the SAB ring
 * and the MessagePort ring. Everything is expressed through the async API (waitReadable,
 * waitWritable), because the port ring delivers records and credits asynchronously.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import fc from 'fast-check';
import type { RingConsumer, RingProducer } from '../../../../actors/ring/types.js';

export interface RingPair {
  producer: RingProducer;
  consumer: RingConsumer;
}

function bytes(n: number, fill: number): Uint8Array {
  return new Uint8Array(n).fill(fill & 0xff);
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

/** Writes every record (waiting when full), then closes. */
export async function writeAll(producer: RingProducer, records: readonly (readonly Uint8Array[])[]): Promise<void> {
  for (const parts of records) {
    const length = parts.reduce((n, p) => n + p.byteLength, 0);
    while (!producer.tryWrite(parts)) await producer.waitWritable(length);
  }
  producer.close();
}

/** Reads until end of stream, copying each record; `batch` varies drain sizes. */
export async function readAll(consumer: RingConsumer, batch: (i: number) => number = () => Infinity): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  let i = 0;
  while (await consumer.waitReadable()) consumer.drain((r) => out.push(r.slice()), batch(i++));
  return out;
}

/** Copies the next available record (waits for one). */
async function readOne(consumer: RingConsumer): Promise<Uint8Array> {
  assert.equal(await consumer.waitReadable(), true);
  let got: Uint8Array | undefined;
  assert.equal(
    consumer.drain((r) => (got = r.slice()), 1),
    1,
  );
  return got!;
}

/** Fills the ring with `size`-byte records until tryWrite refuses; returns how many fit. */
function fill(producer: RingProducer, size: number): number {
  let n = 0;
  while (producer.tryWrite(bytes(size, n))) n++;
  return n;
}

export function ringContract(name: string, makePair: (capacityBytes: number) => RingPair): void {
  void describe(`${name}: ring contract`, () => {
    void test('rejects a capacity that is not a power of two (RangeError)', () => {
      assert.throws(() => makePair(1000), RangeError);
      assert.throws(() => makePair(16), RangeError);
    });

    void test('delivers records in order, byte-exact, including empty and multi-part records', async () => {
      const { producer, consumer } = makePair(1024);
      const records = [[bytes(5, 1)], [], [bytes(0, 0)], [bytes(3, 2), bytes(4, 3)], [bytes(100, 4)]];
      const [, got] = await Promise.all([writeAll(producer, records), readAll(consumer)]);
      assert.deepEqual(got, records.map(concat));
      assert.equal(consumer.usedBytes, 0);
    });

    void test('any random record sequence arrives byte-exact across many wrap-arounds', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(64, 128, 256, 1024),
          // ≤ 3 parts of ≤ 18 bytes: up to 54 bytes; a 64-byte ring takes records up to 56 (64 - 8-byte header).
          fc.array(fc.array(fc.uint8Array({ maxLength: 18, size: 'max' }), { maxLength: 3, size: 'max' }), {
            minLength: 1,
            maxLength: 200,
            size: 'max',
          }),
          fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 10 }),
          async (capacity, records, batches) => {
            const { producer, consumer } = makePair(capacity);
            const [, got] = await Promise.all([writeAll(producer, records), readAll(consumer, (i) => batches[i % batches.length]!)]);
            assert.deepEqual(got, records.map(concat));
          },
        ),
        { numRuns: 60 },
      );
    });

    void test('a full ring refuses a record, then takes it once the consumer drains', async () => {
      const { producer, consumer } = makePair(256);
      const n = fill(producer, 20);
      assert.ok(n >= 1 && n * 20 <= 256, `${n} records of 20 bytes fit in 256`);
      assert.equal(producer.tryWrite(bytes(20, 99)), false, 'still full');
      assert.deepEqual(await readOne(consumer), bytes(20, 0));
      await producer.waitWritable(20);
      assert.equal(producer.tryWrite(bytes(20, 99)), true);
      producer.close();
      const rest = await readAll(consumer);
      assert.equal(rest.length, n);
      assert.deepEqual(rest.at(-1), bytes(20, 99));
    });

    void test('a record larger than the free space waits for room, then goes through whole', async () => {
      const { producer, consumer } = makePair(256);
      assert.equal(producer.tryWrite(bytes(100, 1)), true);
      assert.equal(producer.tryWrite(bytes(100, 2)), true);
      const big = bytes(150, 3);
      assert.equal(producer.tryWrite(big), false);
      let writable = false;
      const waiting = producer.waitWritable(big.byteLength).then(() => (writable = true));
      await tick();
      assert.equal(writable, false, 'no room until the consumer drains');
      assert.deepEqual(await readOne(consumer), bytes(100, 1));
      assert.deepEqual(await readOne(consumer), bytes(100, 2));
      await waiting;
      while (!producer.tryWrite(big)) await producer.waitWritable(big.byteLength);
      producer.close();
      assert.deepEqual(await readAll(consumer), [big]);
    });

    void test('a record over maxRecordBytes is a RangeError; one of exactly maxRecordBytes fits', async () => {
      const { producer, consumer } = makePair(128);
      assert.ok(producer.maxRecordBytes > 0 && producer.maxRecordBytes < producer.capacityBytes);
      assert.throws(() => producer.tryWrite(bytes(producer.maxRecordBytes + 1, 0)), RangeError);
      assert.throws(() => producer.tryWrite([bytes(producer.maxRecordBytes, 0), bytes(1, 0)]), RangeError);
      await assert.rejects(producer.waitWritable(producer.maxRecordBytes + 1), RangeError);
      const max = bytes(producer.maxRecordBytes, 7);
      const records = [[bytes(10, 1)], [max], [bytes(3, 2)], [max]];
      const [, got] = await Promise.all([writeAll(producer, records), readAll(consumer)]);
      assert.deepEqual(got, records.map(concat));
    });

    void test('close: the consumer drains what is there, then sees end of stream', async () => {
      const { producer, consumer } = makePair(256);
      assert.equal(producer.tryWrite(bytes(4, 1)), true);
      assert.equal(producer.tryWrite(bytes(4, 2)), true);
      producer.close();
      producer.close(); // idempotent
      assert.throws(
        () => producer.tryWrite(bytes(1, 0)),
        (err: unknown) => err instanceof Error && !(err instanceof RangeError),
      );
      await producer.waitWritable(10); // resolves on a closed ring
      assert.deepEqual(await readAll(consumer), [bytes(4, 1), bytes(4, 2)]);
      assert.equal(await consumer.waitReadable(), false);
    });

    void test('close wakes a consumer waiting on an empty ring and a producer waiting on a full one', async () => {
      const reader = makePair(256);
      const pendingRead = reader.consumer.waitReadable();
      await tick();
      reader.producer.close();
      assert.equal(await pendingRead, false);

      const writer = makePair(64);
      fill(writer.producer, 20);
      const pendingWrite = writer.producer.waitWritable(20);
      await tick();
      writer.producer.close();
      await pendingWrite;
    });

    void test('aborting a wait rejects with the signal reason', async () => {
      const { producer, consumer } = makePair(64);
      const reason = new Error('gave up');
      await assert.rejects(consumer.waitReadable(AbortSignal.abort(reason)), (e) => e === reason);
      const ac = new AbortController();
      const pendingRead = consumer.waitReadable(ac.signal);
      await tick();
      ac.abort(reason);
      await assert.rejects(pendingRead, (e) => e === reason);

      fill(producer, 20);
      await assert.rejects(producer.waitWritable(20, AbortSignal.abort(reason)), (e) => e === reason);
      const ac2 = new AbortController();
      const pendingWrite = producer.waitWritable(20, ac2.signal);
      await tick();
      ac2.abort(reason);
      await assert.rejects(pendingWrite, (e) => e === reason);
      // The ring still works after aborted waits.
      assert.deepEqual(await readOne(consumer), bytes(20, 0));
    });

    void test('drain honours maxRecords, counts usedBytes, and consumes a record whose handler throws', async () => {
      const { producer, consumer } = makePair(1024);
      assert.equal(consumer.usedBytes, 0);
      assert.equal(
        consumer.drain(() => assert.fail('empty ring')),
        0,
      );
      for (let i = 0; i < 5; i++) assert.equal(producer.tryWrite(bytes(10, i)), true);
      assert.equal(await consumer.waitReadable(), true);
      while (consumer.usedBytes < 5 * 14) await tick(); // the port ring receives asynchronously
      assert.ok(consumer.usedBytes >= 5 * 14, 'payload plus per-record overhead');
      const got: number[] = [];
      assert.equal(
        consumer.drain((r) => got.push(r[0]!), 2),
        2,
      );
      assert.throws(() =>
        consumer.drain(() => {
          throw new Error('handler failed');
        }),
      );
      assert.equal(
        consumer.drain((r) => got.push(r[0]!)),
        2,
      );
      assert.deepEqual(got, [0, 1, 3, 4], 'record 2 was consumed by the throwing handler');
      assert.equal(consumer.usedBytes, 0);
    });
  });
}
