import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SabRingConsumer, SabRingProducer, allocateSabRing } from '../../../../actors/ring/sab-ring.js';
import { kControlBytes, kPadMarker, kTail, recordBytes } from '../../../../actors/ring/layout.js';
import { ringContract } from './ring-contract.js';
import { runTwoThreadStream } from './two-thread.js';

ringContract('SAB ring', (capacityBytes) => {
  const sab = allocateSabRing(capacityBytes);
  return { producer: new SabRingProducer(sab), consumer: new SabRingConsumer(sab) };
});

void describe('SAB ring', () => {
  void test('refuses a SharedArrayBuffer that was not made by allocateSabRing', () => {
    assert.throws(() => new SabRingProducer(new SharedArrayBuffer(kControlBytes + 1024)), TypeError);
    assert.throws(() => new SabRingConsumer(new SharedArrayBuffer(8)), TypeError);
  });

  void test('a record that does not fit before the end starts at 0 and is handed out as one contiguous view', () => {
    const sab = allocateSabRing(64);
    const producer = new SabRingProducer(sab);
    const consumer = new SabRingConsumer(sab);
    assert.equal(producer.tryWrite(new Uint8Array(32).fill(1)), true); // 8-byte header + 32: occupies 0..40
    consumer.drain(() => undefined);
    const record = new Uint8Array(30).fill(2); // 8 + 30 → 40 bytes in the ring: does not fit in 40..64
    assert.equal(producer.tryWrite(record), true);
    const data = new Uint32Array(sab, kControlBytes, 16);
    assert.equal(data[40 / 4], kPadMarker, 'pad marker at the old head');
    const views: Uint8Array[] = [];
    assert.equal(
      consumer.drain((r) => views.push(r)),
      1,
    );
    assert.equal(views[0]!.byteOffset, kControlBytes + 8, 'zero-copy view at the start of the data region, 8-byte aligned');
    assert.deepEqual(new Uint8Array(views[0]!), record);
    const ctrl = new Int32Array(sab, 0, 32);
    assert.equal(Atomics.load(ctrl, kTail), recordBytes(32) + 24 + recordBytes(30));
  });

  void test('alignLast puts the last part at its source address modulo 8, byte-exact, also when only the record without skip fits', () => {
    const sab = allocateSabRing(256);
    const producer = new SabRingProducer(sab);
    const consumer = new SabRingConsumer(sab);
    const source = new Uint8Array(64).map((_, i) => i + 1);
    const header = new Uint8Array([9, 9, 9]);
    for (let at = 0; at < 8; at++) {
      const last = source.subarray(at, at + 20);
      assert.equal(producer.tryWrite([header, last], true), true);
      consumer.drain((r) => {
        assert.deepEqual([...r], [9, 9, 9, ...last]);
        assert.equal((r.byteOffset + header.byteLength) % 8, at % 8, `source offset ${at}`);
      });
    }
    // a fresh 256-byte ring: 6 records of 40 ring bytes (8 + 32) leave 16, where a record of 8 fits only without its skip
    const full = allocateSabRing(256);
    const p2 = new SabRingProducer(full);
    let filled = 0;
    while (p2.tryWrite(new Uint8Array(32))) filled++;
    assert.equal(filled, 6);
    const odd = source.subarray(5, 13);
    assert.equal(p2.tryWrite([odd], true), true);
    const got: number[][] = [];
    new SabRingConsumer(full).drain((r) => got.push([...r]));
    assert.deepEqual(got.at(-1), [...odd]);
  });

  void test('two threads: a worker producer and a main-thread consumer stream 5,000 records byte-exact', async () => {
    const capacityBytes = 64 * 1024;
    const sab = allocateSabRing(capacityBytes);
    await runTwoThreadStream(new SabRingConsumer(sab), { kind: 'sab', sab, capacityBytes, seed: 0x5ab, count: 5000, maxBodyBytes: 3000 });
  });
});
