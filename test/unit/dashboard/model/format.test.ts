import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  fleetSummaryText,
  formatAgo,
  formatBytes,
  formatDuration,
  formatLoad,
  formatMiB,
  formatPercent,
  plural,
  ratioPercent,
  shortId,
} from '../../../../src/dashboard/model/format.js';

describe('dashboard format', () => {
  test('sizes read in binary units with one decimal below ten', () => {
    assert.equal(formatBytes(0), '0 B');
    assert.equal(formatBytes(512), '512 B');
    assert.equal(formatBytes(1536), '1.5 KiB');
    assert.equal(formatBytes(24 * 1024 ** 3), '24 GiB');
    assert.equal(formatBytes(1024 * 1024 - 1), '1.0 MiB');
    assert.equal(formatBytes(-1), '—');
    assert.equal(formatBytes(Number.NaN), '—');
  });

  test('any size prints a number below 1024 and a known unit', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 2 ** 59, noNaN: true }), (n) => {
        const m = /^(\d+(?:\.\d)?) (B|KiB|MiB|GiB|TiB|PiB)$/.exec(formatBytes(n));
        assert.ok(m !== null, formatBytes(n));
        assert.ok(Number(m[1]) < 1024, formatBytes(n));
      }),
    );
  });

  test('VM memory in MiB', () => {
    assert.equal(formatMiB(8192), '8 GiB');
    assert.equal(formatMiB(1536), '1.5 GiB');
    assert.equal(formatMiB(768), '768 MiB');
  });

  test('percentages clamp and keep narrow', () => {
    assert.equal(formatPercent(0), '0%');
    assert.equal(formatPercent(3.21), '3.2%');
    assert.equal(formatPercent(52.9), '53%');
    assert.equal(formatPercent(140), '100%');
    assert.equal(formatPercent(Number.NaN), '—');
    assert.equal(ratioPercent(1, 4), 25);
    assert.ok(Number.isNaN(ratioPercent(1, 0)));
  });

  test('durations show their two largest units', () => {
    assert.equal(formatDuration(59), '59s');
    assert.equal(formatDuration(61), '1m 1s');
    assert.equal(formatDuration(3725), '1h 2m');
    assert.equal(formatDuration(90061), '1d 1h');
    assert.equal(formatDuration(7200), '2h');
    assert.equal(formatDuration(null), '—');
  });

  test('ages are relative to now and never negative', () => {
    const now = 1_000_000_000;
    assert.equal(formatAgo(now - 2000, now), 'just now');
    assert.equal(formatAgo(now + 60_000, now), 'just now');
    assert.equal(formatAgo(now - 12_000, now), '12s ago');
    assert.equal(formatAgo(now - 5 * 60_000, now), '5m ago');
    assert.equal(formatAgo(now - 3 * 3600_000, now), '3h ago');
    assert.equal(formatAgo(now - 2 * 86_400_000, now), '2d ago');
    assert.equal(formatAgo(0, now), '—');
  });

  test('small helpers', () => {
    assert.equal(formatLoad([0.5, 0.25, 1]), '0.50 0.25 1.00');
    assert.equal(formatLoad(undefined), '—');
    assert.equal(plural(1, 'agent'), '1 agent');
    assert.equal(plural(3, 'agent'), '3 agents');
    assert.equal(shortId('task-1234567890abcdef', 12), 'task-…bcdef');
    assert.equal(shortId('short'), 'short');
  });

  test('the top bar summary leaves out what has not loaded', () => {
    assert.equal(fleetSummaryText({ agentsLoaded: false, agents: 0, ready: 0, vmsLoaded: false, vms: 0, vmsRunning: 0 }), '');
    assert.equal(
      fleetSummaryText({ agentsLoaded: true, agents: 0, ready: 0, vmsLoaded: true, vms: 0, vmsRunning: 0 }),
      'No agents · No VMs',
    );
    assert.equal(
      fleetSummaryText({ agentsLoaded: true, agents: 3, ready: 3, vmsLoaded: true, vms: 4, vmsRunning: 2 }),
      '3 agents, all ready · 2 of 4 VMs running',
    );
    assert.equal(
      fleetSummaryText({ agentsLoaded: true, agents: 3, ready: 1, vmsLoaded: false, vms: 0, vmsRunning: 0 }),
      '3 agents, 1 ready',
    );
  });
});
