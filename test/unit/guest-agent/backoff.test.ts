import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Backoff } from '../../../src/guest-agent/backoff.js';

describe('Backoff', () => {
  test('ceilings double from 500 ms up to the maximum', () => {
    const b = new Backoff({ initialMs: 500, maxMs: 30_000, random: () => 0.999999 });
    const delays = Array.from({ length: 10 }, () => b.nextDelayMs());
    assert.deepEqual(delays, [499, 999, 1999, 3999, 7999, 15999, 29999, 29999, 29999, 29999]);
  });

  test('full jitter: every delay lies in [0, ceiling] and they spread out', () => {
    const b = new Backoff({ initialMs: 500, maxMs: 30_000 });
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const ceiling = b.ceilingMs();
      const d = b.nextDelayMs();
      assert.ok(d >= 0 && d <= ceiling, `${d} within [0, ${ceiling}]`);
      seen.add(Math.floor(d / 1000));
    }
    assert.ok(seen.size > 10, 'delays are spread over the range, not constant');
  });

  test('reset starts over after a healthy connection', () => {
    const b = new Backoff({ initialMs: 500, maxMs: 30_000, random: () => 0.5 });
    for (let i = 0; i < 8; i++) b.nextDelayMs();
    assert.equal(b.ceilingMs(), 30_000);
    b.reset();
    assert.equal(b.attempts, 0);
    assert.equal(b.nextDelayMs(), 250);
  });

  test('never overflows after many failures', () => {
    const b = new Backoff({ initialMs: 500, maxMs: 30_000, random: () => 0.5 });
    for (let i = 0; i < 10_000; i++) assert.ok(Number.isFinite(b.nextDelayMs()));
    assert.equal(b.ceilingMs(), 30_000);
  });
});
