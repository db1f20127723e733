import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TaskSlots } from '../../../src/tasks/task-slots.js';

describe('TaskSlots', () => {
  test('at most `max` holders; the rest wait and get slots in submission order', async () => {
    const slots = new TaskSlots(2);
    const order: number[] = [];
    const releases: Array<() => void> = [];
    const waits = [0, 1, 2, 3, 4].map((i) =>
      slots.acquire().then((release) => {
        order.push(i);
        releases.push(release);
      }),
    );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [0, 1]);
    assert.equal(slots.inUse, 2);
    assert.equal(slots.waiting, 3);
    releases[1]?.();
    releases[1]?.(); // idempotent: frees one slot only
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [0, 1, 2]);
    assert.equal(slots.inUse, 2);
    releases[0]?.();
    releases[2]?.();
    await Promise.all(waits);
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
  });

  test('an aborted wait leaves the line and rejects with the reason', async () => {
    const slots = new TaskSlots(1);
    const first = await slots.acquire();
    const ac = new AbortController();
    const waiting = slots.acquire(ac.signal);
    const next = slots.acquire();
    assert.equal(slots.waiting, 2);
    ac.abort(new Error('cancelled while pending'));
    await assert.rejects(waiting, /cancelled while pending/);
    assert.equal(slots.waiting, 1);
    first();
    const second = await next;
    assert.equal(slots.inUse, 1);
    second();
    assert.equal(slots.inUse, 0);
    await assert.rejects(slots.acquire(AbortSignal.abort(new Error('already'))), /already/);
  });

  test('max must be a positive integer', () => {
    assert.throws(() => new TaskSlots(0), RangeError);
    assert.throws(() => new TaskSlots(1.5), RangeError);
  });
});
