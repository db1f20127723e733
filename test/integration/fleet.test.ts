/**
 * The fleet inventory and reconcile on real parts (README "Fleet inventory and reconcile"): a real
 * sandboxd on the libvirt test driver with its operations store, mTLS gRPC listener and real local
 * sandbox-agent processes, driven through its routes. Changes behind sandboxd's back are made on a
 * raw libvirt connection to the same test:///default (the binding, not sandboxd's port or API).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Hypervisor } from '@unraid/libvirt';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import pino from 'pino';
import type { Config } from '../../src/config/schema.js';
import { FLEET_DIR, fleetComponent, fleetInventoryComponent } from '../../src/fleet/component.js';
import { SqliteInventoryStore } from '../../src/fleet/inventory-store.js';
import { testDomainXml } from '../../src/hypervisor/libvirt/domain-xml.js';
import { inject, type InjectResponse } from '../../src/http/inject.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import type { Component } from '../../src/component/component.js';
import type { FleetReconcileDryRun, FleetWorkloadsResponse, ReconcileResultJson, WorkloadJson } from '../../src/wire/fleet.js';
import type { AdminOperation } from '../../src/wire/vms.js';
import { repoRoot } from '../support/paths.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { uniqueName, vmServerComponents } from './vms-harness.js';

type Json = Record<string, unknown>;

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const schema = JSON.parse(readFileSync(join(repoRoot, 'src', 'fleet', 'fleet-workload-v1.schema.json'), 'utf8')) as { $id: string };
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv, ['date-time']);
ajv.addSchema(schema);
/** Asserts `value` is a `def` of the published schema (the answers and the schema agree). */
function assertSchema(def: string, value: unknown): void {
  const check = ajv.getSchema(`${schema.$id}#/$defs/${def}`)!;
  assert.ok(check(value), `${def}: ${JSON.stringify(check.errors)}`);
}

const components = (): Component[] =>
  vmServerComponents({ admin: true, beforeVms: [fleetInventoryComponent()], afterVms: [fleetComponent({ sweepIntervalMs: 0 })] });

describe('fleet inventory and reconcile', () => {
  let dir: string;
  let config: Config;
  let server: ServerHandle;
  const made: string[] = [];

  const req = (method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<InjectResponse> =>
    inject(server.router, { method, url, headers, ...(body !== undefined ? { body } : {}) });
  const inventory = async (): Promise<FleetWorkloadsResponse> => {
    const r = await req('GET', '/api/v2/fleet/workloads');
    assert.equal(r.status, 200, r.text);
    assertSchema('WorkloadsResponse', r.json());
    return r.json() as FleetWorkloadsResponse;
  };
  const workload = (inv: FleetWorkloadsResponse, name: string): WorkloadJson | undefined => inv.workloads.find((w) => w.name === name);

  async function operation(id: string, prefix = '/api/v2/admin/operations'): Promise<AdminOperation> {
    return waitFor(
      `operation ${id} finished`,
      async () => {
        const op = (await req('GET', `${prefix}/${id}`)).json() as AdminOperation;
        return op.status === 'completed' || op.status === 'failed' ? op : null;
      },
      { deadlineMs: DEADLINE_MS.endToEnd, intervalMs: 100 },
    );
  }

  async function createVm(base: string, body: Json = {}): Promise<string> {
    const name = uniqueName(base);
    made.push(name);
    const r = await req('POST', '/api/v1/vms', { name, profile: 'basic', vcpus: 1, memory_mb: 256, disk_gb: 1, ...body });
    assert.equal(r.status, 202, r.text);
    const op = await operation((r.json() as { operation: { id: string } }).operation.id, '/api/v1/operations');
    assert.equal(op.status, 'completed', op.error);
    return name;
  }

  /** The inventory once two reads in a row show the same revision and `ok` holds. */
  async function settled(what: string, ok: (inv: FleetWorkloadsResponse) => boolean): Promise<FleetWorkloadsResponse> {
    let last: FleetWorkloadsResponse | null = null;
    return waitFor(
      what,
      async () => {
        const inv = await inventory();
        const prev = last;
        last = inv;
        return prev !== null && prev.inventory_revision === inv.inventory_revision && ok(inv) ? inv : null;
      },
      { deadlineMs: DEADLINE_MS.endToEnd, intervalMs: 150, lastState: () => JSON.stringify(last?.drift_counts) },
    );
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-fleet-'));
    config = loopbackConfig(dir, {
      SVC_ACTORS: 'workers',
      SVC_ACTOR_SHARDS: '1',
      SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000',
      SVC_HYPERVISOR_READ_BUDGET_MS: '20000',
    });
    server = await startServer(config, pino({ level: 'silent' }), { components: components() });
  });

  after(async () => {
    for (const name of made) await server?.hypervisor.undefine(name, { force: true }).catch(() => undefined);
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('100 concurrent changes give strictly increasing revisions, none equal and none lost, kept on disk', async () => {
    const { store } = server.service('fleetInventory');
    const start = (await inventory()).inventory_revision;
    const seen: number[] = [];
    const off = store.onChange((revision) => seen.push(revision));
    const names = Array.from({ length: 100 }, (_, i) => `agent-rev${i}-${Math.random().toString(36).slice(2, 6)}`);
    made.push(...names);
    try {
      // 100 creates at once (not started: no agents), each a desired change and observed changes.
      const accepted = await Promise.all(
        names.map((name) => req('POST', '/api/v1/vms', { name, profile: 'basic', vcpus: 1, memory_mb: 256, disk_gb: 1, start: false })),
      );
      for (const r of accepted) assert.equal(r.status, 202, r.text);
      const ops = await Promise.all(
        accepted.map((r) => operation((r.json() as { operation: { id: string } }).operation.id, '/api/v1/operations')),
      );
      for (const op of ops) assert.equal(op.status, 'completed', op.error);
      const inv = await inventory();
      for (const name of names) {
        const w = workload(inv, name);
        assert.ok(w !== undefined, `${name} is in the inventory`);
        assert.equal(w.desired?.state, 'stopped');
        assert.equal(w.lineage?.origin, 'vm_create');
        assert.equal(w.observed.domain?.state, 'stopped');
        assert.equal(w.drift, 'none', w.drift_reason);
        assert.ok(w.revision > start && w.revision <= inv.inventory_revision);
      }
      assert.ok(seen.length >= 200, `at least one desired and one observed change per VM (${seen.length})`);
      for (let i = 0; i < seen.length; i++) assert.equal(seen[i], start + i + 1, 'each change takes the next revision');
      assert.equal(inv.inventory_revision, seen.at(-1));
      // The file holds the same revision (synchronous=FULL: every change committed before it is shown).
      const reader = new SqliteInventoryStore(join(config.stateDir, FLEET_DIR));
      try {
        assert.equal(reader.revision(), inv.inventory_revision);
        assert.equal(reader.list().filter((r) => names.includes(r.name) && r.desired !== null).length, 100);
      } finally {
        await reader.close();
      }
      // Deleted through sandboxd: gone from the inventory.
      const dels = await Promise.all(names.map((n) => req('DELETE', `/api/v1/vms/${n}?force=true&delete_disk=true`)));
      for (const r of dels) assert.equal(r.status, 200, r.text);
      const after = await inventory();
      for (const name of names) assert.equal(workload(after, name), undefined, `${name} left the inventory`);
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i]! > seen[i - 1]!);
    } finally {
      off();
    }
  });

  test('a reconcile refuses a stale or missing before_revision with a stable code', async () => {
    const inv = await inventory();
    const stale = await req('POST', '/api/v2/fleet/reconcile', { before_revision: inv.inventory_revision + 7 });
    assert.equal(stale.status, 409, stale.text);
    const err = (stale.json() as { error: { code: string; details: { inventory_revision: number } } }).error;
    assert.equal(err.code, 'fleet.stale_inventory_revision');
    assert.equal(err.details.inventory_revision, inv.inventory_revision);
    if (inv.inventory_revision > 0) {
      const old = await req('POST', '/api/v2/fleet/reconcile', { before_revision: inv.inventory_revision - 1 });
      assert.equal(old.status, 409);
    }
    for (const body of [
      {},
      { before_revision: -1 },
      { before_revision: '3' },
      { before_revision: 1, dry_run: 'yes' },
      { before_revision: 1, extra: 1 },
      [1],
    ]) {
      const r = await req('POST', '/api/v2/fleet/reconcile', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal((r.json() as { error: { code: string } }).error.code, 'request.invalid');
    }
  });

  test("a reconcile converges a fleet drifted behind sandboxd's back; dry run acts on nothing; the operation lists each action", async () => {
    const keep = await createVm('keep');
    const gone = await createVm('gone');
    const halted = await createVm('halt');
    const idle = await createVm('idle');
    const stopped = await req('POST', `/api/v1/vms/${idle}/stop`);
    assert.equal(stopped.status, 200, stopped.text);
    assert.equal(workload(await inventory(), idle)?.desired?.state, 'stopped', 'a stop through the API makes it desired stopped');
    const stray = uniqueName('stray');
    const foreign = uniqueName('foreign');
    made.push(stray, foreign);
    const raw = new Hypervisor({ uri: 'test:///default' });
    await raw.connectOpen();
    try {
      // Behind sandboxd's back: one VM removed, one powered off, two defined (one with sandboxd's metadata).
      const g = await raw.domainLookupByName(gone);
      await g.destroy();
      await g.undefine();
      await (await raw.domainLookupByName(halted)).destroy();
      const i = await raw.domainLookupByName(idle);
      await i.create(); // started behind sandboxd's back
      await raw.domainDefineXML(
        testDomainXml({ name: stray, vcpus: 1, memoryMiB: 256, metadata: { profile: 'basic', instanceId: randomUUID(), labels: {} } }),
      );
      await raw.domainDefineXML(testDomainXml({ name: foreign, vcpus: 1, memoryMiB: 256 }));
    } finally {
      await raw.connectClose();
    }
    await server.hypervisor.pollNow(); // the poller stops the agents of the VMs that went away

    const drifted = await settled(
      'the drift to be seen',
      (inv) => workload(inv, gone)?.drift === 'missing' && workload(inv, stray) !== undefined,
    );
    assert.equal(workload(drifted, keep)?.drift, 'none');
    assert.equal(workload(drifted, gone)?.drift, 'missing');
    assert.equal(workload(drifted, halted)?.drift, 'state_mismatch');
    assert.equal(workload(drifted, idle)?.drift, 'state_mismatch');
    assert.equal(workload(drifted, stray)?.drift, 'unmanaged');
    assert.equal(workload(drifted, stray)?.desired, null);
    assert.equal(workload(drifted, foreign)?.drift, 'foreign');

    // Dry run: the plan, and nothing done.
    const dry = await req('POST', '/api/v2/fleet/reconcile', { before_revision: drifted.inventory_revision, dry_run: true });
    assert.equal(dry.status, 200, dry.text);
    assertSchema('DryRun', dry.json());
    const plan = (dry.json() as FleetReconcileDryRun).plan;
    const planned = new Map(plan.steps.map((s) => [s.workload, s.action]));
    assert.deepEqual(
      [keep, gone, halted, idle, stray, foreign].map((n) => planned.get(n)),
      ['none', 'create', 'start', 'stop', 'delete', 'none'],
    );
    const still = await inventory();
    assert.equal(still.inventory_revision, drifted.inventory_revision, 'a dry run changes nothing');
    assert.equal(await server.hypervisor.get(gone), null);
    assert.equal((await server.hypervisor.get(halted))?.state, 'stopped');
    assert.notEqual(await server.hypervisor.get(stray), null);

    // The reconcile, with an Idempotency-Key.
    const key = `fleet-${randomUUID()}`;
    const body = { before_revision: still.inventory_revision };
    const r = await req('POST', '/api/v2/fleet/reconcile', body, { 'idempotency-key': key });
    assert.equal(r.status, 202, r.text);
    const accepted = (r.json() as { operation: AdminOperation }).operation;
    assert.equal(r.headers['location'], `/api/v2/admin/operations/${accepted.id}`);
    assert.equal(accepted.type, 'fleet_reconcile');
    const replay = await req('POST', '/api/v2/fleet/reconcile', body, { 'idempotency-key': key });
    assert.equal(replay.status, 202);
    assert.equal(replay.headers['idempotency-replayed'], 'true');
    assert.equal(replay.text, r.text, 'a replay answers the original bytes, and starts nothing');
    const conflict = await req('POST', '/api/v2/fleet/reconcile', { before_revision: 0 }, { 'idempotency-key': key });
    assert.equal(conflict.status, 409);
    assert.equal((conflict.json() as { error: { code: string } }).error.code, 'idempotency.key_conflict');

    const done = await operation(accepted.id);
    assert.equal(done.status, 'completed', done.error);
    assertSchema('ReconcileResult', done.result);
    const result = done.result as unknown as ReconcileResultJson;
    assert.equal(result.before_revision, still.inventory_revision);
    assert.ok(result.after_revision > result.before_revision);
    const outcome = new Map(result.steps.map((s) => [s.workload, s]));
    assert.equal(outcome.get(gone)?.outcome, 'created');
    assert.match(outcome.get(gone)?.operation_id ?? '', /^op-/);
    assert.equal(outcome.get(halted)?.outcome, 'started');
    assert.equal(outcome.get(idle)?.outcome, 'stopped');
    assert.equal(outcome.get(stray)?.outcome, 'deleted');
    assert.equal(outcome.get(foreign)?.outcome, 'left_alone');
    assert.equal(outcome.get(keep)?.outcome, 'left_alone');
    for (const s of result.steps) assert.ok(s.reason.length > 0, `${s.workload} has a reason`);
    assert.equal(result.counts.failed, 0, JSON.stringify(result.steps.filter((s) => s.outcome === 'failed')));

    // Converged: what the hypervisor and the agents registry show.
    assert.equal((await server.hypervisor.get(gone))?.state, 'running');
    assert.equal((await server.hypervisor.get(halted))?.state, 'running');
    assert.notEqual((await server.hypervisor.get(idle))?.state, 'running');
    assert.equal(await server.hypervisor.get(stray), null);
    assert.notEqual(await server.hypervisor.get(foreign), null, 'a domain without sandboxd metadata is never touched');
    const converged = await settled('the agents of the remade VMs to be connected', (inv) =>
      [keep, gone, halted].every((n) => workload(inv, n)?.observed.agent?.connected === true),
    );
    for (const n of [keep, gone, halted]) assert.equal(workload(converged, n)?.drift, 'none', n);
    assert.equal(workload(converged, idle)?.drift, 'none', 'desired stopped, observed stopped');
    assert.equal(workload(converged, stray), undefined);
    assert.equal(workload(converged, gone)?.last_reconcile?.outcome, 'created');
    assert.equal(workload(converged, gone)?.last_reconcile?.operation_id, accepted.id);
    await server.hypervisor.undefine(foreign).catch(() => undefined);
  });

  test('the inventory and its revision survive a restart; a VM removed while sandboxd was down is missing after it; a viewer reads but cannot reconcile', async () => {
    const kept = await createVm('kept');
    const lost = await createVm('lost');
    const before = await settled('the new VMs with their agents', (inv) =>
      [kept, lost].every((n) => workload(inv, n)?.observed.agent?.connected === true),
    );
    await server.stop();
    const raw = new Hypervisor({ uri: 'test:///default' });
    await raw.connectOpen();
    try {
      // test:///default lives in this process: the domains outlive the stopped server.
      const l = await raw.domainLookupByName(lost);
      await l.destroy().catch(() => undefined);
      await l.undefine();
    } finally {
      await raw.connectClose();
    }
    server = await startServer({ ...config, localRole: 'viewer' }, pino({ level: 'silent' }), { components: components() });
    const inv = await settled('the inventory after the restart', (i) => workload(i, lost)?.drift === 'missing');
    assert.ok(inv.inventory_revision > before.inventory_revision, 'the revision went on from where it was');
    assert.equal(workload(inv, kept)?.desired?.state, 'running');
    assert.equal(workload(inv, kept)?.lineage?.origin, 'vm_create', 'not re-adopted: its lineage is kept');
    assert.equal(workload(inv, lost)?.desired?.owner.actor, 'local');
    const refused = await req('POST', '/api/v2/fleet/reconcile', { before_revision: inv.inventory_revision, dry_run: true });
    assert.equal(refused.status, 403, refused.text);
    assert.equal((refused.json() as { error: { code: string } }).error.code, 'auth.permission_denied');
  });
});
