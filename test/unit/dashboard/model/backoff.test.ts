import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { backoffDelayMs } from '../../../../src/dashboard/model/backoff.js';

describe('dashboard reconnect backoff', () => {
  test('doubles from the base up to the cap, jittered over the upper half', () => {
    assert.equal(
      backoffDelayMs(0, { baseMs: 1000 }, () => 0),
      500,
    );
    assert.equal(
      backoffDelayMs(1, { baseMs: 1000 }, () => 0),
      1000,
    );
    assert.equal(
      backoffDelayMs(2, { baseMs: 1000 }, () => 0.999999),
      4000,
    );
    assert.equal(
      backoffDelayMs(50, { baseMs: 1000, maxMs: 15_000 }, () => 0),
      7500,
    );
  });

  test('always within [cap/2, cap]', () => {
    fc.assert(
      fc.property(fc.integer({ min: -5, max: 100 }), fc.double({ min: 0, max: 1, noNaN: true }), (attempt, r) => {
        const d = backoffDelayMs(attempt, { baseMs: 500, maxMs: 15_000 }, () => r);
        const cap = Math.min(15_000, 500 * 2 ** Math.max(0, Math.min(attempt, 30)));
        assert.ok(d >= cap / 2 - 1 && d <= cap, `${attempt} ${r} → ${d}`);
      }),
    );
  });
});
