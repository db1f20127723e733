import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CircuitBreaker } from '../../../src/hypervisor/circuit-breaker.js';

function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

describe('CircuitBreaker', () => {
  test('opens after N consecutive failures and refuses with the remaining cool-down', () => {
    const c = clock();
    const b = new CircuitBreaker({ failureThreshold: 3, coolDownMs: 30_000, now: c.now });
    for (let i = 0; i < 2; i++) {
      assert.deepEqual(b.admit(), { ok: true, probe: false });
      b.failure('timeout');
    }
    assert.equal(b.state, 'closed');
    b.admit();
    b.failure('timeout');
    assert.equal(b.state, 'open');
    c.advance(10_000);
    assert.deepEqual(b.admit(), { ok: false, retryAfterMs: 20_000 });
    assert.equal(b.retryAfterMs(), 20_000);
    assert.equal(b.lastError, 'timeout');
  });

  test('a success in between resets the count', () => {
    const b = new CircuitBreaker({ failureThreshold: 3 });
    b.failure('x');
    b.failure('x');
    b.success();
    b.failure('x');
    b.failure('x');
    assert.equal(b.state, 'closed');
  });

  test('after the cool-down exactly one probe goes through; its success closes the circuit', () => {
    const c = clock();
    const b = new CircuitBreaker({ failureThreshold: 1, coolDownMs: 1000, now: c.now });
    b.failure('down');
    c.advance(1000);
    assert.equal(b.state, 'half-open');
    assert.deepEqual(b.admit(), { ok: true, probe: true });
    assert.equal(b.admit().ok, false, 'a second caller waits for the probe');
    b.success();
    assert.equal(b.state, 'closed');
    assert.deepEqual(b.admit(), { ok: true, probe: false });
  });

  test('a failed probe reopens with a longer, jittered cool-down, capped', () => {
    const c = clock();
    const b = new CircuitBreaker({ failureThreshold: 1, coolDownMs: 1000, maxCoolDownMs: 3000, now: c.now, random: () => 0.5 });
    b.failure('down');
    assert.equal(b.retryAfterMs(), 1000, 'the first opening lasts exactly coolDownMs');
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      c.advance(b.retryAfterMs());
      const a = b.admit();
      assert.ok(a.ok && a.probe);
      b.failure('still down', true);
      waits.push(b.retryAfterMs());
    }
    assert.deepEqual(waits, [2000, 3000, 3000, 3000]);
  });

  test('a released probe lets the next caller probe', () => {
    const c = clock();
    const b = new CircuitBreaker({ failureThreshold: 1, coolDownMs: 10, now: c.now });
    b.failure('x');
    c.advance(10);
    assert.ok(b.admit().ok);
    b.releaseProbe();
    assert.deepEqual(b.admit(), { ok: true, probe: true });
  });
});
