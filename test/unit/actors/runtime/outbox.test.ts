/**
 * Outbox: an actor's frames keep their order through a full outbound ring and none is left
 * behind, also when the ring frees room at any moment (the consumer is another thread).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Outbox } from '../../../../actors/runtime/outbox.js';
import { FakeActorContext } from './fake-actor-context.js';

/** A context whose emit refuses the next `refusals` frames, as a full ring would. */
class RefusingContext extends FakeActorContext {
  refusals = 0;
  override emit(kind: number, key: string, payload: Uint8Array): boolean {
    if (this.refusals > 0) {
      this.refusals--;
      return false;
    }
    return super.emit(kind, key, payload);
  }
}

void describe('Outbox', () => {
  void test('in order through a full ring; idle() once the last frame is out', async () => {
    const ctx = new FakeActorContext('o-1');
    const out = new Outbox(ctx);
    out.emit(1, 'k', Uint8Array.of(0));
    ctx.full = true;
    for (let i = 1; i < 5; i++) out.emit(1, 'k', Uint8Array.of(i));
    assert.equal(out.queuedBytes, 4);
    ctx.drain();
    await out.idle();
    assert.deepEqual(
      ctx.frames.map((f) => f.payload[0]),
      [0, 1, 2, 3, 4],
    );
    assert.equal(out.queuedBytes, 0);
  });

  // The ring freed room between emit's refused try and the flush's first retry, so that flush
  // finished synchronously. It used to leave the outbox believing a flush was still running:
  // the next refused frame was queued with nothing to write it, and idle() resolved anyway
  // (a worker actor's burst then never reached the main thread; actor-system.test hung).
  void test('a flush that finishes at once does not strand the next refused frame', async () => {
    const ctx = new RefusingContext('o-2');
    const out = new Outbox(ctx);
    ctx.refusals = 1;
    out.emit(1, 'k', Uint8Array.of(1));
    assert.equal(out.queuedBytes, 0, 'the retry wrote it at once');
    ctx.full = true;
    out.emit(1, 'k', Uint8Array.of(2));
    assert.equal(out.queuedBytes, 1);
    let idle = false;
    const done = out.idle().then(() => (idle = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(idle, false, 'idle() waits while a frame is queued');
    ctx.drain();
    await done;
    assert.deepEqual(
      ctx.frames.map((f) => f.payload[0]),
      [1, 2],
    );
    assert.equal(out.queuedBytes, 0);
  });

  // An actor assembles frames in a reused Buffer (command-replay.ts Scratch): a frame queued
  // behind a full ring must keep its bytes when the actor writes the next frame there.
  void test('a queued frame is a copy, also when the payload is a view of a reused Buffer', async () => {
    const ctx = new FakeActorContext('o-3');
    const out = new Outbox(ctx);
    const scratch = Buffer.alloc(8);
    ctx.full = true;
    for (let i = 1; i <= 3; i++) {
      scratch.fill(i);
      out.emit(1, 'k', scratch.subarray(0, 4));
    }
    scratch.fill(9);
    ctx.drain();
    await out.idle();
    assert.deepEqual(
      ctx.frames.map((f) => [...f.payload]),
      [
        [1, 1, 1, 1],
        [2, 2, 2, 2],
        [3, 3, 3, 3],
      ],
    );
  });
});
