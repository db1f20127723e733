import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { CursorClock, formatOutputCursor, parseOutputCursor } from '../../../../actors/protocol/output-cursor.js';

void describe('output cursors', () => {
  void test('the clock increases strictly even when time stands still or goes back', () => {
    let now = 1_000;
    const clock = new CursorClock(() => now);
    const a = clock.next();
    const b = clock.next();
    now = 500;
    const c = clock.next();
    assert.equal(a, 1_000_000);
    assert.ok(b > a && c > b);
    assert.equal(clock.last, c);
  });

  void test('a restarted actor starts above the cursors the previous one handed out', () => {
    let now = 1_000;
    const before = new CursorClock(() => now);
    for (let i = 0; i < 500; i++) before.next();
    now = 1_001;
    assert.ok(new CursorClock(() => now).next() > before.last);
  });

  void test('format and parse round-trip; anything else is rejected', () => {
    fc.assert(
      fc.property(fc.maxSafeNat(), fc.maxSafeNat(), (clock, seq) => {
        assert.deepEqual(parseOutputCursor(formatOutputCursor(clock, seq)), { clock, seq });
      }),
    );
    for (const bad of ['', '12', '-1-2', '1-', 'a-1', '1-2-3', '1.5-2', '99999999999999999-1', '1 - 2'])
      assert.equal(parseOutputCursor(bad), null, bad);
  });
});
