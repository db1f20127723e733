import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { DEFAULT_INBOX_QUOTA_BYTES, InboxQuota, treeBytes } from '../../../src/storage/inbox-quota.js';

describe('InboxQuota', () => {
  let base: string;
  let inboxes: string;
  before(() => {
    base = mkdtempSync(join(tmpdir(), 'sbx-quota-'));
    inboxes = join(base, 'inbox');
    mkdirSync(join(inboxes, 'agent-a', 'deep', 'er'), { recursive: true });
    mkdirSync(join(inboxes, 'agent-b'), { recursive: true });
    writeFileSync(join(inboxes, 'agent-a', 'one.bin'), Buffer.alloc(1000));
    writeFileSync(join(inboxes, 'agent-a', 'deep', 'er', 'two.bin'), Buffer.alloc(500));
    writeFileSync(join(inboxes, 'agent-b', 'x.bin'), Buffer.alloc(250));
    writeFileSync(join(base, 'huge-outside.bin'), Buffer.alloc(100_000));
    // A symlink counts as itself, never as what it points to.
    symlinkSync(join(base, 'huge-outside.bin'), join(inboxes, 'agent-a', 'link'));
    symlinkSync(base, join(inboxes, 'agent-a', 'dirlink'));
  });
  after(() => rmSync(base, { recursive: true, force: true }));

  test('the default quota is the spec’s 50 GB', () => {
    assert.equal(DEFAULT_INBOX_QUOTA_BYTES, 50 * 1000 ** 3);
  });

  test('usage walks the inbox without following symlinks; a missing inbox is empty', async () => {
    const q = new InboxQuota({ inboxesDir: inboxes });
    const a = await q.usage('agent-a');
    assert.ok(a >= 1500 && a < 1500 + 1000, `about 1500 bytes plus two symlinks, got ${a}`);
    assert.equal(await q.usage('agent-b'), 250);
    assert.equal(await q.usage('agent-new'), 0);
    await assert.rejects(q.usage('../etc'), (e: unknown) => e instanceof SvcError && e.code === 'storage.invalid_path');
    assert.equal(await treeBytes(join(base, 'nope')), 0);
  });

  test('checkQuota resolves under the quota and rejects 507 storage.quota_exceeded over it', async () => {
    const q = new InboxQuota({ inboxesDir: inboxes, quotaBytes: 1000 });
    await q.checkQuota('agent-b', 750);
    await assert.rejects(q.checkQuota('agent-b', 751), (e: unknown) => {
      assert.ok(e instanceof SvcError);
      assert.equal(e.code, 'storage.quota_exceeded');
      assert.equal(e.httpStatus, 507);
      assert.match(e.message, /holds 250 bytes; 751 more would exceed its quota of 1000 bytes/u);
      return true;
    });
    await assert.rejects(q.checkQuota('agent-b', -1), (e: unknown) => e instanceof SvcError && e.code === 'request.invalid');
  });

  test('writes inside the cache window add up through noteWritten; the cache expires', async () => {
    let now = 0;
    const q = new InboxQuota({ inboxesDir: inboxes, quotaBytes: 1000, refreshIntervalMs: 10_000, now: () => now });
    await q.checkQuota('agent-b', 700);
    q.noteWritten('agent-b', 700);
    await assert.rejects(q.checkQuota('agent-b', 100), (e: unknown) => e instanceof SvcError && e.code === 'storage.quota_exceeded');
    now = 20_000; // the next check walks again and sees the real 250 bytes
    await q.checkQuota('agent-b', 100);
  });

  test('concurrent checks share one walk', async () => {
    const q = new InboxQuota({ inboxesDir: inboxes });
    const results = await Promise.all(Array.from({ length: 20 }, () => q.usage('agent-b')));
    assert.ok(results.every((r) => r === 250));
  });

  test('refreshAll reports the total of every inbox on svc_agentshare_inbox_bytes', async () => {
    const m = createMetrics({ defaultMetrics: false });
    const q = new InboxQuota({ inboxesDir: inboxes, gauge: m.agentshareInboxBytes });
    const total = await q.refreshAll();
    const expected = (await treeBytes(join(inboxes, 'agent-a'))) + 250;
    assert.equal(total, expected);
    const metric = await m.registry.getSingleMetric('svc_agentshare_inbox_bytes')?.get();
    assert.equal(metric?.values[0]?.value, expected);
  });

  test('start/stop are idempotent and the first walk runs at once', async () => {
    const m = createMetrics({ defaultMetrics: false });
    const q = new InboxQuota({ inboxesDir: inboxes, gauge: m.agentshareInboxBytes, refreshIntervalMs: 60_000 });
    q.start();
    q.start();
    await q.stop();
    await q.stop();
    assert.ok(q.totalBytes() >= 1750);
  });

  test('a missing inboxes directory is simply empty', async () => {
    const q = new InboxQuota({ inboxesDir: join(base, 'no-inboxes') });
    assert.equal(await q.refreshAll(), 0);
  });
});
