/**
 * ExpiryTimer (src/util/expiry-timer.ts): fires once at the armed time, re-arming moves it,
 * Infinity and cancel disarm it, and a time past setTimeout's longest delay does not fire at once
 * (setTimeout itself would: it treats a longer delay as 1 ms).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExpiryTimer } from '../../../src/util/expiry-timer.js';

void describe('ExpiryTimer', () => {
  void test('fires once at the armed time; re-arming earlier moves it; Infinity and cancel disarm', async () => {
    let fired = 0;
    const t = new ExpiryTimer(() => fired++);
    t.arm(Date.now() + 60_000);
    t.arm(Date.now() + 10);
    await sleep(60);
    assert.equal(fired, 1, 'the earlier time replaced the later one, and fired once');
    t.arm(Date.now() + 10);
    t.arm(Infinity);
    await sleep(40);
    assert.equal(fired, 1, 'Infinity disarmed it');
    t.arm(Date.now() + 10);
    t.cancel();
    await sleep(40);
    assert.equal(fired, 1, 'cancel disarmed it');
  });

  void test('an expiry 40 days away does not fire now', async () => {
    let fired = 0;
    const t = new ExpiryTimer(() => fired++);
    t.arm(Date.now() + 40 * 86_400_000);
    await sleep(50);
    assert.equal(fired, 0);
    t.cancel();
  });
});
