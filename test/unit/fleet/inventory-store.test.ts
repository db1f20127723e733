/**
 * The fleet inventory store (src/fleet/inventory-store.ts) on a real SQLite file, and the drift
 * rules (src/fleet/records.ts): every change takes the next revision, changes that change nothing
 * take none, and the revision and the records survive a reopen.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SqliteInventoryStore } from '../../../src/fleet/inventory-store.js';
import { classify, content, NOT_OBSERVED, type DesiredRecord, type WorkloadRecord } from '../../../src/fleet/records.js';
import { desired } from '../../support/fleet-records.js';
import type { ObservedDomain } from '../../../src/wire/fleet.js';

const domain = (over: Partial<ObservedDomain> = {}): ObservedDomain => ({
  state: 'running',
  uuid: 'u',
  host: 'test:///default',
  vcpus: 1,
  memory_mb: 256,
  instance_id: 'i',
  managed: true,
  labels: {},
  ...over,
});

describe('fleet inventory store', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-fleet-store-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('100 concurrent changes from interleaved tasks take 100 distinct, increasing revisions, kept across a reopen', async () => {
    const path = join(dir, 'a');
    const store = new SqliteInventoryStore(path);
    const got: number[] = [];
    await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        await new Promise((r) => setTimeout(r, (i * 7) % 13));
        const rev = store.update(`agent-w${i % 10}`, (held) =>
          content(desired({ vcpus: (held?.desired?.vcpus ?? 0) + 1 }), NOT_OBSERVED, null),
        );
        assert.notEqual(rev, null);
        got.push(rev!);
      }),
    );
    assert.deepEqual(
      [...got].sort((a, b) => a - b),
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    for (let i = 1; i < got.length; i++) assert.ok(got[i]! > got[i - 1]!, 'in the order the changes were made');
    // none lost: the 10 workloads together counted 100 increments
    assert.equal(
      store.list().reduce((n, r) => n + (r.desired?.vcpus ?? 0), 0),
      100,
    );
    await store.close();
    const again = new SqliteInventoryStore(path);
    assert.equal(again.revision(), 100);
    assert.equal(again.list().length, 10);
    assert.equal(
      again.update('agent-w0', (h) => content(h!.desired, h!.observed, h!.lastReconcile)),
      null,
      'no change, no revision',
    );
    assert.equal(
      again.update('agent-new', () => content(desired(), NOT_OBSERVED, null)),
      101,
    );
    assert.equal(
      again.update('agent-new', () => null),
      102,
      'a removal is a change',
    );
    assert.equal(
      again.update('agent-new', () => null),
      null,
      'removing nothing is none',
    );
    await again.close();
  });

  test('the drift rules', () => {
    const rec = (d: DesiredRecord | null, dom: ObservedDomain | null): WorkloadRecord => ({
      ...content(d, { domain: dom, agent: null, changedAtMs: 1 }, null),
      name: 'agent-x',
      revision: 1,
    });
    const none = (): boolean => false;
    const cases: [WorkloadRecord, string, string][] = [
      [rec(desired(), domain()), 'none', 'none'],
      [rec(desired(), null), 'missing', 'create'],
      [rec(desired(), domain({ state: 'stopped' })), 'state_mismatch', 'start'],
      [rec(desired(), domain({ state: 'crashed' })), 'state_mismatch', 'start'],
      [rec(desired(), domain({ state: 'paused' })), 'state_mismatch', 'none'],
      [rec(desired({ state: 'stopped' }), domain()), 'state_mismatch', 'stop'],
      [rec(desired({ state: 'stopped' }), domain({ state: 'shutdown' })), 'none', 'none'],
      [rec(null, domain()), 'unmanaged', 'delete'],
      [rec(null, domain({ labels: { 'sandboxd/enrollment': 'deferred' } })), 'unmanaged', 'none'],
      [rec(null, domain({ managed: false, instance_id: null })), 'foreign', 'none'],
    ];
    for (const [r, drift, action] of cases) {
      const s = classify(r, none);
      assert.deepEqual([s.drift, s.action], [drift, action], JSON.stringify(r));
      assert.ok(s.reason.length > 0);
    }
    const pending = classify(rec(desired({ pendingOperationId: 'op-2' }), null), (id) => id === 'op-2');
    assert.deepEqual([pending.drift, pending.action], ['pending', 'none']);
    const busy = (vm: string): string | null => (vm === 'agent-x' ? 'op-9' : null);
    const restarting = classify(rec(desired(), domain({ state: 'stopped' })), none, busy);
    assert.deepEqual([restarting.drift, restarting.action], ['pending', 'none'], 'an operation running on the VM holds it back');
    const refilling = classify(rec(null, domain()), none, busy);
    assert.deepEqual([refilling.drift, refilling.action], ['unmanaged', 'none'], 'a VM an operation is making is not deleted');
    const ended = classify(rec(desired({ pendingOperationId: 'op-2' }), null), none);
    assert.deepEqual([ended.drift, ended.action], ['missing', 'create'], 'a pending operation that ended holds nothing back');
  });
});
