import assert from 'node:assert/strict';
import { cpus, release, totalmem } from 'node:os';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MetricsSampler } from '../../../src/guest-agent/metrics.js';
import { readSystemInfo } from '../../../src/guest-agent/system-info.js';

describe('system info and metrics (this machine)', () => {
  test('SystemInfo describes the real machine', async () => {
    const info = await readSystemInfo(process.cwd());
    assert.match(info.os, /^Linux\b/);
    assert.equal(info.kernel, release());
    assert.equal(info.cpuCores, cpus().length);
    assert.equal(info.memoryBytes, totalmem());
    assert.ok(info.diskBytes > 100 * 1024 * 1024, `disk ${info.diskBytes}`);
    assert.ok(info.hostname.length > 0);
    assert.ok(info.ipAddress === '' || /^\d+\.\d+\.\d+\.\d+$/.test(info.ipAddress));
  });

  test('metrics are within sane bounds and CPU load shows up', async () => {
    const m = new MetricsSampler(process.cwd());
    await m.sample();
    const end = Date.now() + 300;
    while (Date.now() < end) {
      // busy loop: this process uses a CPU for 300 ms
    }
    // A measured interval: the next sample compares CPU times over the busy loop and this pause.
    await sleep(10);
    const s = await m.sample();
    assert.ok(s.cpuPercent > 0 && s.cpuPercent <= 100, `cpu ${s.cpuPercent}`);
    assert.ok(s.memoryUsedBytes > 0 && s.memoryUsedBytes < s.memoryTotalBytes);
    assert.equal(s.memoryTotalBytes, totalmem());
    assert.ok(s.diskTotalBytes > 0 && s.diskUsedBytes > 0 && s.diskUsedBytes <= s.diskTotalBytes);
    assert.equal(s.loadAvg.length, 3);
    assert.ok(s.loadAvg.every((l) => l >= 0));
    assert.ok(s.uptimeSeconds > 0);
  });
});
