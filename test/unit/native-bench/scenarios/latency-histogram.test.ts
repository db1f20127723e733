import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compactHistogram, histogram, percentiles } from '../../../../native-bench/scenarios/latency-client.js';

describe('latency bench: the histogram on the result line (what the bench report plots)', () => {
  test('has the shape {unit: "ms", percentiles: [[p, v], ...]} with the tail percentiles the target is judged on', () => {
    const h = histogram();
    for (let us = 1; us <= 1000; us++) h.recordValue(us * 10); // 10 µs .. 10 ms
    const c = compactHistogram(h);
    assert.equal(c.unit, 'ms');
    const ps = c.percentiles.map(([p]) => p);
    for (const p of [0, 50, 99, 99.9, 100]) assert.ok(ps.includes(p), `percentile ${p} present`);
    const at = new Map(c.percentiles);
    assert.ok(Math.abs(at.get(50)! - 5) < 0.01, `p50 ≈ 5 ms, got ${at.get(50)}`);
    assert.ok(Math.abs(at.get(99)! - 9.9) < 0.01, `p99 ≈ 9.9 ms, got ${at.get(99)}`);
    assert.ok(Math.abs(at.get(100)! - 10) < 0.01, `p100 ≈ 10 ms, got ${at.get(100)}`);
    assert.equal(at.get(0), 0.01);
    assert.deepEqual(JSON.parse(JSON.stringify(c)), c, 'survives JSON unchanged');
  });

  test('values never decrease with the percentile, and agree with the per-transport summary', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 60_000_000 }), { minLength: 1, maxLength: 300 }), (values) => {
        const h = histogram();
        for (const v of values) h.recordValue(v);
        const c = compactHistogram(h);
        for (let i = 1; i < c.percentiles.length; i++) assert.ok(c.percentiles[i]![1] >= c.percentiles[i - 1]![1]);
        const s = percentiles(h);
        const at = new Map(c.percentiles);
        assert.equal(at.get(99), s.p99Ms);
        assert.equal(at.get(99.9), s.p999Ms);
        assert.equal(s.count, values.length);
      }),
    );
  });

  test('an empty histogram has no points rather than made-up zeros', () => {
    assert.deepEqual(compactHistogram(histogram()), { unit: 'ms', percentiles: [] });
  });
});
