/**
 * ActorLane: frames to one actor keep their order through backpressure, wait instead of being
 * dropped, and resolve drained() once delivered.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ActorLane, type ActorPort } from '../../../../actors/runtime/actor-lane.js';

/** A port whose "ring" takes `capacity` frames until freed. */
class TinyPort implements ActorPort {
  readonly delivered: number[] = [];
  room: number;
  #waiters: (() => void)[] = [];
  constructor(capacity: number) {
    this.room = capacity;
  }
  send(_id: string, _kind: number, payload: Uint8Array): boolean {
    if (this.room === 0) return false;
    this.room--;
    this.delivered.push(payload[0]!);
    return true;
  }
  whenWritable(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
  free(n: number): void {
    this.room += n;
    for (const w of this.#waiters.splice(0)) w();
  }
  spawn(): Promise<void> {
    return Promise.resolve();
  }
  call<T>(): Promise<T> {
    return Promise.reject(new Error('unused'));
  }
  stopActor(): Promise<void> {
    return Promise.resolve();
  }
}

void describe('ActorLane', () => {
  void test('in order through a full ring, nothing dropped, drained() after the last frame', async () => {
    const port = new TinyPort(3);
    const lane = new ActorLane(port, 'a', () => assert.fail('no error expected'));
    const immediate = Array.from({ length: 10 }, (_, i) => lane.push(1, Uint8Array.of(i)));
    assert.deepEqual(immediate, [true, true, true, false, false, false, false, false, false, false]);
    let drained = false;
    const d = lane.drained().then(() => (drained = true));
    for (let i = 0; i < 7; i++) {
      port.free(1);
      await new Promise((r) => setImmediate(r));
    }
    await d;
    assert.equal(drained, true);
    assert.deepEqual(port.delivered, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.equal(lane.queued, 0);
  });

  void test('a send that throws drops that frame and reports it; close() drops what waits', async () => {
    const errors: unknown[] = [];
    const port = new TinyPort(0);
    port.send = () => {
      throw new RangeError('too big');
    };
    const lane = new ActorLane(port, 'a', (err) => errors.push(err));
    assert.equal(lane.push(1, Uint8Array.of(1)), true);
    assert.equal(errors.length, 1);
    const p2 = new TinyPort(0);
    const lane2 = new ActorLane(p2, 'b', () => undefined);
    lane2.push(1, Uint8Array.of(1));
    const drained = lane2.drained();
    lane2.close();
    await drained;
    assert.equal(lane2.queued, 0);
  });
});
