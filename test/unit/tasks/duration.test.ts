import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { formatDuration, parseDuration } from '../../../src/tasks/duration.js';

describe('durations', () => {
  test('parses the documented forms', () => {
    assert.equal(parseDuration('90s'), 90_000);
    assert.equal(parseDuration('30m'), 1_800_000);
    assert.equal(parseDuration('2h'), 7_200_000);
    assert.equal(parseDuration('1h30m'), 5_400_000);
    assert.equal(parseDuration('7d'), 604_800_000);
    assert.equal(parseDuration('1d2h3m4s'), 93_784_000);
    assert.equal(parseDuration('0s'), 0);
  });

  test('refuses everything else', () => {
    for (const bad of [
      '',
      '30',
      '-5m',
      '+5m',
      '1y',
      '5mm',
      '1h 30m',
      '30m1h',
      '1.5h',
      '500ms',
      'h',
      '1H',
      ' 1h',
      '1h\n',
      '12345678s',
      '1w',
    ]) {
      assert.equal(parseDuration(bad), null, JSON.stringify(bad));
    }
  });

  test('property: format then parse is the identity on whole seconds', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 30 * 86_400 }), (seconds) => {
        assert.equal(parseDuration(formatDuration(seconds * 1000)), seconds * 1000);
      }),
    );
  });
});
