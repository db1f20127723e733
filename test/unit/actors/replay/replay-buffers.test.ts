/**
 * The buffers replays are joined into (actors/replay/replay-buffers.ts) and their lending
 * (actors/protocol/replay-lease.ts): a buffer lent to the main thread is never written again
 * until it is released; a released one is reused instead of allocating; replays too large, or
 * finding every slot lent, get a fresh buffer; lent buffers never released are forgotten, idle
 * ones dropped.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { releaseReplayBytes } from '../../../../actors/protocol/replay-lease.js';
import { ReplayBufferPool } from '../../../../actors/replay/replay-buffers.js';

const fill = (b: Uint8Array, v: number): Uint8Array => b.fill(v);

void describe('ReplayBufferPool', () => {
  void test('a lent buffer is not handed out again until released; then the same memory is reused', () => {
    const pool = new ReplayBufferPool({ slots: 2 });
    const a = pool.take(1000, true);
    assert.equal(a.bytes.byteLength, 1000);
    assert.ok(a.lease !== undefined && a.lease > 0);
    assert.ok(a.bytes.buffer instanceof SharedArrayBuffer);
    fill(a.bytes, 1);
    const b = pool.take(1000, true);
    assert.notEqual(b.bytes.buffer, a.bytes.buffer);
    fill(b.bytes, 2);
    // Both slots lent: a third replay gets a fresh buffer, not one of them.
    const c = pool.take(1000, true);
    assert.equal(c.lease, undefined);
    fill(c.bytes, 3);
    assert.ok(a.bytes.every((x) => x === 1) && b.bytes.every((x) => x === 2));
    releaseReplayBytes(a);
    const d = pool.take(900, true);
    assert.equal(d.bytes.buffer, a.bytes.buffer);
    assert.equal(d.bytes.byteLength, 900);
    assert.notEqual(d.lease, a.lease);
    assert.equal(pool.reused, 1);
    assert.equal(pool.fresh, 1);
  });

  void test('releasing twice, or with an old ticket, does not free a buffer lent again', () => {
    const pool = new ReplayBufferPool({ slots: 1 });
    const a = pool.take(100, true);
    releaseReplayBytes(a);
    const b = pool.take(100, true);
    assert.equal(b.bytes.buffer, a.bytes.buffer);
    releaseReplayBytes(a); // stale: b holds it now
    assert.equal(pool.take(100, true).lease, undefined);
    releaseReplayBytes(b);
    assert.ok(pool.take(100, true).lease !== undefined);
  });

  void test('a replay larger than maxSlotBytes, or empty, gets a fresh buffer (a plain one on request)', () => {
    const pool = new ReplayBufferPool({ maxSlotBytes: 4096 });
    const big = pool.take(4097, false);
    assert.equal(big.lease, undefined);
    assert.equal(big.bytes.byteLength, 4097);
    assert.ok(!(big.bytes.buffer instanceof SharedArrayBuffer));
    assert.equal(pool.take(0, true).lease, undefined);
    assert.equal(pool.held, 0);
  });

  void test('a free buffer too small is replaced by a larger one', () => {
    const pool = new ReplayBufferPool({ slots: 1, maxSlotBytes: 1 << 20 });
    const small = pool.take(100_000, true);
    releaseReplayBytes(small);
    const large = pool.take(300_000, true);
    assert.notEqual(large.bytes.buffer, small.bytes.buffer);
    assert.equal(large.bytes.byteLength, 300_000);
    assert.equal(pool.held, 1);
  });

  void test('a buffer never released is forgotten after staleMs and never written again; idle ones are dropped', () => {
    let nowMs = 0;
    const pool = new ReplayBufferPool({ slots: 1, staleMs: 1000, idleMs: 500, now: () => nowMs });
    const lost = pool.take(64, true);
    fill(lost.bytes, 7);
    nowMs = 999;
    assert.equal(pool.take(64, true).lease, undefined);
    nowMs = 1001;
    const next = pool.take(64, true);
    assert.ok(next.lease !== undefined);
    assert.notEqual(next.bytes.buffer, lost.bytes.buffer);
    fill(next.bytes, 9);
    assert.ok(lost.bytes.every((x) => x === 7));
    releaseReplayBytes(next);
    nowMs = 1400;
    pool.dropIdle();
    assert.equal(pool.held, 1);
    nowMs = 1501;
    pool.dropIdle();
    assert.equal(pool.held, 0);
  });
});
