import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { sparklinePaths } from '../../../../src/dashboard/model/sparkline.js';

function points(d: string): Array<[number, number]> {
  return [...d.matchAll(/[ML](-?[\d.]+),(-?[\d.]+)/g)].map((m) => [Number(m[1]), Number(m[2])]);
}

describe('dashboard sparkline', () => {
  test('values are spread over the width, high values near the top', () => {
    const p = sparklinePaths([0, 50, 100], { width: 100, height: 20, max: 100 });
    assert.deepEqual(points(p.line), [
      [0, 20],
      [50, 10],
      [100, 0],
    ]);
    assert.deepEqual(p.last, { x: 100, y: 0 });
    assert.match(p.area, /Z$/);
  });

  test('nothing to draw without finite values', () => {
    assert.deepEqual(sparklinePaths([], { width: 10, height: 10 }), { line: '', area: '', last: null });
    assert.deepEqual(sparklinePaths([Number.NaN], { width: 10, height: 10 }), { line: '', area: '', last: null });
  });

  test('a gap (NaN) breaks the line into two runs', () => {
    const p = sparklinePaths([10, 20, Number.NaN, 30], { width: 30, height: 10, max: 100 });
    assert.equal((p.line.match(/M/g) ?? []).length, 2);
    assert.equal((p.area.match(/Z/g) ?? []).length, 2);
  });

  test('every point stays inside the box (inset respected)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.double({ noNaN: false }), fc.constant(Number.NaN)), { maxLength: 60 }),
        fc.integer({ min: 0, max: 5 }),
        (values, inset) => {
          const p = sparklinePaths(values, { width: 80, height: 24, max: 100, inset });
          for (const [x, y] of points(p.line)) {
            assert.ok(x >= 0 && x <= 80, `x ${x}`);
            assert.ok(y >= inset - 0.05 && y <= 24 - inset + 0.05, `y ${y}`);
          }
        },
      ),
    );
  });
});
