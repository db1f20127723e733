import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { after, describe, test } from 'node:test';
import { CallLane } from '../../../src/hypervisor/call-lane.js';
import { TimeoutError } from '../../../src/util/deadline.js';

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('CallLane', () => {
  // The lane's timers are unref'd (they never keep a server alive); keep this test process alive.
  const keepAlive = setInterval(() => undefined, 1000);
  after(() => clearInterval(keepAlive));

  test('runs at most `concurrency` calls at once, the rest in order', async () => {
    const lane = new CallLane(2);
    let inFlight = 0;
    let peak = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        lane.run(
          async () => {
            inFlight++;
            peak = Math.max(peak, inFlight);
            await new Promise((r) => setTimeout(r, 5));
            inFlight--;
            order.push(i);
          },
          Date.now() + 10_000,
          'op',
        ),
      ),
    );
    assert.equal(peak, 2);
    assert.deepEqual(order.slice(0, 2).sort(), [0, 1]);
  });

  test('a call past its deadline is answered at once but keeps its slot until it returns', async () => {
    const lane = new CallLane(1);
    const hung = deferred<string>();
    await assert.rejects(
      lane.run(() => hung.promise, Date.now() + 30, 'hung call'),
      (e: unknown) => e instanceof TimeoutError && /hung call/.test(e.message),
    );
    assert.equal(lane.stuck, 1);
    assert.equal(lane.active, 1);
    // The next call cannot get the slot and times out waiting.
    await assert.rejects(
      lane.run(() => Promise.resolve('x'), Date.now() + 30, 'next'),
      /waited for a free slot/,
    );
    hung.resolve('late');
    await new Promise((r) => setImmediate(r));
    assert.equal(lane.stuck, 0);
    assert.equal(await lane.run(() => Promise.resolve('ok'), Date.now() + 1000, 'after'), 'ok');
  });

  test('rejections pass through; an abort signal stops the wait', async () => {
    const lane = new CallLane(1);
    await assert.rejects(
      lane.run(() => Promise.reject(new Error('nope')), Date.now() + 1000, 'op'),
      /nope/,
    );
    const hung = deferred<void>();
    const first = lane.run(() => hung.promise, Date.now() + 10_000, 'first');
    const ac = new AbortController();
    const second = lane.run(() => Promise.resolve(), Date.now() + 10_000, 'second', ac.signal);
    ac.abort(new Error('caller gone'));
    await assert.rejects(second, /caller gone/);
    assert.equal(lane.queued, 0);
    hung.resolve();
    await first;
  });
  test('an answer that arrived in time is not lost when the event loop was busy past the deadline', async () => {
    const lane = new CallLane(1);
    // stat completes on libuv's thread pool; its answer waits in the poll phase while this thread
    // is busy, and the deadline's timer comes due in the same turn of the loop.
    const call = lane.run(() => stat('/'), Date.now() + 20, 'stat while the loop is busy');
    const busyUntil = Date.now() + 500;
    while (Date.now() < busyUntil) {
      // the main thread is busy (another request, a GC pause, a starved core)
    }
    const st = await call;
    assert.ok(st.isDirectory(), 'the answer is delivered, not replaced by a timeout');
    assert.equal(lane.stuck, 0);
  });
});
