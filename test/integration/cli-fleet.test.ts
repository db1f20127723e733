/**
 * sbx fleet against the real server with the default components (libvirt test driver, local
 * agents): workloads in a table and as JSON, a dry-run plan, a stale revision refused with its
 * code, a reconcile waited for, and a retry with the same --idempotency-key answered from the first.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FleetReconcileDryRun, FleetWorkloadsResponse } from '../../src/wire/fleet.js';
import { runSbx, sbxJson, startCliServer, vmName, waitFor, type CliServer } from './cli-harness.js';

let srv: CliServer;
before(async () => {
  srv = await startCliServer();
});
after(async () => {
  await srv?.stop();
});

interface Op {
  id: string;
  type: string;
  status: string;
  result?: { steps?: { workload: string; outcome: string }[]; after_revision?: number };
}

describe('sbx fleet', () => {
  test('workloads, reconcile --dry-run, a stale revision, reconcile with --idempotency-key', async () => {
    const vm = vmName('cli-fleet');
    const created = await sbxJson<Op>(srv, ['vm', 'create', vm, '--profile', 'basic', '--memory-mb', '256']);
    assert.equal(created.status, 'completed');
    const inv = await waitFor('the VM in the inventory with its agent Ready', async () => {
      const i = await sbxJson<FleetWorkloadsResponse>(srv, ['fleet', 'workloads']);
      return i.workloads.find((w) => w.name === vm)?.observed.agent?.status === 'Ready' ? i : undefined;
    });
    const mine = inv.workloads.find((w) => w.name === vm);
    assert.deepEqual(
      [mine?.desired?.state, mine?.desired?.profile, mine?.lineage?.origin, mine?.drift],
      ['running', 'basic', 'vm_create', 'none'],
    );
    assert.equal(mine?.desired?.owner.actor, 'local', 'the trusted local listener is the owner');

    const table = await runSbx(srv, ['fleet', 'workloads']);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, new RegExp(`${vm}\\s+running\\s+running\\s+Ready\\s+none`));
    assert.match(table.stdout, /inventory_revision \d+/);

    const rev = (await sbxJson<FleetWorkloadsResponse>(srv, ['fleet', 'workloads'])).inventory_revision;
    const dry = await sbxJson<FleetReconcileDryRun>(srv, ['fleet', 'reconcile', '--before-revision', String(rev), '--dry-run']);
    assert.equal(dry.plan.steps.find((s) => s.workload === vm)?.action, 'none');

    const stale = await runSbx(srv, ['fleet', 'reconcile', '--before-revision', String(rev + 1000)]);
    assert.notEqual(stale.code, 0);
    assert.match(stale.stderr, /fleet\.stale_inventory_revision/);
    const usage = await runSbx(srv, ['fleet', 'reconcile']);
    assert.notEqual(usage.code, 0);
    assert.match(usage.stderr, /--before-revision/);

    const op = await sbxJson<Op>(srv, ['fleet', 'reconcile', '--before-revision', String(rev), '--idempotency-key', 'cli-fleet-key']);
    assert.deepEqual([op.type, op.status], ['fleet_reconcile', 'completed']);
    assert.equal(op.result?.steps?.find((s) => s.workload === vm)?.outcome, 'left_alone');
    const retry = await runSbx(srv, [
      'fleet',
      'reconcile',
      '--before-revision',
      String(rev),
      '--idempotency-key',
      'cli-fleet-key',
      '--no-wait',
      '--json',
    ]);
    assert.equal(retry.code, 0, retry.stderr);
    assert.equal((JSON.parse(retry.stdout) as { operation: { id: string } }).operation.id, op.id, 'the retry replayed the first answer');

    const deleted = await runSbx(srv, ['vm', 'delete', vm, '--force']);
    assert.equal(deleted.code, 0, deleted.stderr);
    const after = await sbxJson<FleetWorkloadsResponse>(srv, ['fleet', 'workloads']);
    assert.equal(
      after.workloads.find((w) => w.name === vm),
      undefined,
      'deleted through sandboxd: no longer desired',
    );
  });
});
