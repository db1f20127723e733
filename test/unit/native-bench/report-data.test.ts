/** What the bench report reads out of result lines (native-bench/report/report-data.ts). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseRun } from '../../../native-bench/report/run-file.js';
import { esc, judgedFigure, parseTarget, seriesOfLine, statusOf, workersVsInlineOf } from '../../../native-bench/report/report-data.js';
import type { ResultLine } from '../../../native-bench/types.js';

const base: ResultLine = { scenario: 's', value: 2, unit: 'ms', ceiling: null, ratio: null, target: 'value <= 5', pass: true };

describe('bench report data', () => {
  test('percentile series: top-level, named and nested ones; fractions read as percent; sorted', () => {
    const line: ResultLine = {
      ...base,
      histogram: {
        unit: 'ms',
        percentiles: [
          [99, 4],
          [50, 1],
          [100, 9],
        ],
      },
      histograms: {
        ws: {
          unit: 'ms',
          percentiles: [
            [0.5, 1],
            [0.999, 3],
          ],
        },
      },
      workers: { sse: { unit: 'ms', percentiles: [[90, 2], ['bad', 1], [99]] } },
    };
    const s = seriesOfLine(line);
    assert.deepEqual(
      s.map((x) => [x.name, x.points]),
      [
        [
          's',
          [
            [50, 1],
            [99, 4],
            [100, 9],
          ],
        ],
        [
          'ws',
          [
            [50, 1],
            [99.9, 3],
          ],
        ],
        ['workers sse', [[90, 2]]],
      ],
    );
  });

  test('workers vs inline: the line own figure first, then nested ones with their path', () => {
    const line: ResultLine = { ...base, workersVsInline: 1.2, kinds: { hash: { workersVsInline: 0.9 } } };
    assert.deepEqual(workersVsInlineOf(line), [
      { where: '', ratio: 1.2 },
      { where: 'kinds hash', ratio: 0.9 },
    ]);
  });

  test('targets, judged figures and status', () => {
    assert.deepEqual(parseTarget('ratio >= 0.8'), { kind: 'ratioAtLeast', bound: 0.8 });
    assert.deepEqual(parseTarget('value <= 5'), { kind: 'valueAtMost', bound: 5 });
    assert.deepEqual(parseTarget('ratio <= 0.2'), { kind: 'ratioAtMost', bound: 0.2 });
    assert.deepEqual(judgedFigure({ ...base, ratio: 0.1, ceiling: 20, target: 'ratio <= 0.2' }), { figure: 0.1, higherIsBetter: false });
    assert.equal(parseTarget('something else'), null);
    assert.deepEqual(judgedFigure(base), { figure: 2, higherIsBetter: false });
    assert.deepEqual(judgedFigure({ ...base, ratio: 0.5, ceiling: 4, target: 'ratio >= 0.8' }), { figure: 0.5, higherIsBetter: true });
    assert.equal(statusOf({ ...base, pass: false }), 'missed');
    assert.equal(statusOf({ ...base, value: null, pass: false, error: 'boom' }), 'failed');
    assert.equal(statusOf({ ...base, target: null }), 'ran');
  });

  test('escaping and saved runs: a machine record, skipped lines, the last line of a scenario wins', () => {
    assert.equal(esc(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    const run = parseRun(
      ['{"machine":{"cores":2}}', 'garbage', '', JSON.stringify(base), JSON.stringify({ ...base, value: 3 }), '[1]'].join('\n'),
      'x.ndjson',
    );
    assert.deepEqual(run.machine, { cores: 2 });
    assert.deepEqual(
      run.lines.map((l) => l.value),
      [3],
    );
    assert.deepEqual(run.skipped, ['line 2: not JSON', 'line 6: neither a result line nor a machine record']);
  });
});
