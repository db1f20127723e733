import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { matchUpdates, percentile, type DisplayLog, type SendLog } from '../../../../native-bench/scenarios/dashboard-stats.js';

const window = { fromMs: 1000, toMs: 2000 };

describe('dashboard bench: matching sent metrics updates with the repaints that showed them', () => {
  test('every update repainted soon after it was sent is shown, exactly and in time', () => {
    const sends: SendLog = new Map([
      ['a', [1000, 1500]],
      ['b', [1200]],
    ]);
    const displays: DisplayLog = new Map([
      [
        'a',
        [
          [1, 1040],
          [2, 1530],
        ] as const,
      ],
      ['b', [[1, 1290]] as const],
    ]);
    const d = matchUpdates(sends, displays, window, 1000);
    assert.deepEqual(d, { sent: 3, shown: 3, shownExactly: 3, timely: 3, latenciesMs: [30, 40, 90] });
  });

  test('only updates sent inside the window count', () => {
    const sends: SendLog = new Map([['a', [900, 1000, 1999, 2000]]]);
    const displays: DisplayLog = new Map([
      [
        'a',
        [
          [1, 950],
          [2, 1010],
          [3, 2010],
          [4, 2020],
        ] as const,
      ],
    ]);
    const d = matchUpdates(sends, displays, window, 1000);
    assert.equal(d.sent, 2);
    assert.deepEqual(d.latenciesMs, [10, 11]);
  });

  test('an update skipped for a newer one of the same agent counts as shown when the newer one is, not exactly', () => {
    const sends: SendLog = new Map([['a', [1000, 1100, 1200]]]);
    const displays: DisplayLog = new Map([
      [
        'a',
        [
          [1, 1010],
          [3, 1250],
        ] as const,
      ],
    ]);
    const d = matchUpdates(sends, displays, window, 1000);
    assert.equal(d.shown, 3);
    assert.equal(d.shownExactly, 2);
    assert.deepEqual(d.latenciesMs, [10, 50, 150]);
  });

  test('updates never repainted are not shown; ones repainted after the deadline are shown but late', () => {
    const sends: SendLog = new Map([
      ['a', [1000, 1100]],
      ['b', [1000]],
    ]);
    const displays: DisplayLog = new Map([['a', [[1, 2500]] as const]]);
    const d = matchUpdates(sends, displays, window, 1000);
    assert.deepEqual(d, { sent: 3, shown: 1, shownExactly: 1, timely: 0, latenciesMs: [1500] });
  });

  test('a repaint stamped a little before its send (two clocks) counts as no latency', () => {
    const d = matchUpdates(new Map([['a', [1500]]]), new Map([['a', [[1, 1499]] as const]]), window, 1000);
    assert.deepEqual(d.latenciesMs, [0]);
    assert.equal(d.timely, 1);
  });

  test('the counts always nest: timely and exactly shown within shown within sent', () => {
    const agentLog = fc.tuple(
      fc.array(fc.integer({ min: 0, max: 3000 }), { maxLength: 30 }).map((xs) => xs.sort((a, b) => a - b)),
      fc.array(fc.tuple(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 4000 })), { maxLength: 30 }),
    );
    fc.assert(
      fc.property(fc.array(agentLog, { maxLength: 5 }), fc.integer({ min: 0, max: 2000 }), (agents, deadlineMs) => {
        const sends = new Map<string, number[]>();
        const displays = new Map<string, Array<readonly [number, number]>>();
        agents.forEach(([sent, shows], i) => {
          sends.set(`a${i}`, sent);
          // what the page records: increasing sequences in time order
          const bySeq = [...new Map(shows.sort((x, y) => x[0] - y[0])).entries()];
          const times = bySeq.map(([, t]) => t).sort((x, y) => x - y);
          displays.set(
            `a${i}`,
            bySeq.map(([seq], k) => [seq, times[k]!] as const),
          );
        });
        const d = matchUpdates(sends, displays, window, deadlineMs);
        assert.ok(d.timely <= d.shown && d.shownExactly <= d.shown && d.shown <= d.sent);
        assert.equal(d.latenciesMs.length, d.shown);
        assert.ok(d.latenciesMs.every((x, k) => x >= 0 && (k === 0 || x >= d.latenciesMs[k - 1]!)));
      }),
    );
  });
});

describe('dashboard bench: percentile', () => {
  test('nearest rank over an ascending list; 0 for none', () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(xs, 50), 50);
    assert.equal(percentile(xs, 99), 99);
    assert.equal(percentile(xs, 100), 100);
    assert.equal(percentile([7], 99), 7);
    assert.equal(percentile([], 99), 0);
  });
});
