import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cpuSeries, memorySeries, MetricsHistory } from '../../../../src/dashboard/model/metrics-history.js';

const s = (atMs: number, cpu = 10) => ({ atMs, cpuPercent: cpu, memoryUsedBytes: 1, memoryTotalBytes: 4 });

describe('dashboard metrics history', () => {
  test('keeps samples in time order and ignores repeats', () => {
    const h = new MetricsHistory();
    assert.equal(h.push('a', s(1000)), true);
    assert.equal(h.push('a', s(1000)), false);
    assert.equal(h.push('a', s(500)), false);
    assert.equal(h.push('a', s(2000, 20)), true);
    assert.deepEqual(cpuSeries(h.samples('a')), [10, 20]);
    assert.deepEqual(memorySeries(h.samples('a')), [25, 25]);
    assert.deepEqual(h.samples('nobody'), []);
  });

  test('is bounded by age and by count', () => {
    const h = new MetricsHistory({ windowMs: 10_000, maxSamples: 5 });
    for (let t = 0; t <= 20_000; t += 1000) h.push('a', s(t));
    const kept = h.samples('a');
    assert.equal(kept.length, 5);
    assert.equal(kept[kept.length - 1]?.atMs, 20_000);
    const h2 = new MetricsHistory({ windowMs: 3000, maxSamples: 100 });
    for (let t = 0; t <= 10_000; t += 1000) h2.push('a', s(t));
    assert.deepEqual(
      h2.samples('a').map((x) => x.atMs),
      [7000, 8000, 9000, 10_000],
    );
  });

  test('forgets agents that are gone', () => {
    const h = new MetricsHistory();
    h.push('a', s(1));
    h.push('b', s(1));
    h.retain(new Set(['b']));
    assert.equal(h.agentCount, 1);
    assert.deepEqual(h.samples('a'), []);
  });
});
