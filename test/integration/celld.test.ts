/**
 * Celld on real parts (README "Celld"): a real sandboxd on libvirt's test driver with its
 * operations store, VM feature, agent listener and the effect ledger in SQLite. Status discovers
 * readiness without paths; with Celld off or unconfigured every command is a 503 with its code;
 * validate, preflight, diagnose and plan-upgrade leave the hypervisor, the agents and the ledger as
 * they were; a cell command replays only its exact document (no second effect), conflicts on any
 * other, and a client that never reads its answer learns the outcome from the scoped ledger read;
 * a generation-only reconcile runs once and is never replayed.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { adminListenerComponent, authComponent } from '../../src/auth/component.js';
import { bootstrapComponent } from '../../src/bootstrap/component.js';
import { checkpointsComponent } from '../../src/checkpoints/component.js';
import { requestHash } from '../../src/celld/document.js';
import { celldComponent } from '../../src/celld/component.js';
import type { CelldFleetLink } from '../../src/celld/fleet-link.js';
import type { Component } from '../../src/component/component.js';
import { eventsComponent } from '../../src/events/component.js';
import { AGENT_VERSION } from '../../src/guest-agent/version.js';
import { inject, type InjectResponse } from '../../src/http/inject.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { operationsComponent } from '../../src/operations/component.js';
import { actorsComponent, hypervisorComponent, jobsComponent } from '../../src/server/runtime-components.js';
import { vmsComponent } from '../../src/vms/component.js';
import type {
  CellCommandAccepted,
  CellCommandRecord,
  CelldStatus,
  CapabilitiesResponse,
  DiagnoseReport,
  PreflightReport,
  UpgradePlan,
} from '../../src/wire/celld.js';
import type { AdminOperation } from '../../src/wire/vms.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { uniqueName } from './vms-harness.js';

type Json = Record<string, unknown>;

const CELL = 'cell-a';

/**
 * Stands in for the fleet inventory (src/fleet, merged separately) through the narrow interface
 * Celld uses: a revision, and a reconcile that runs as an operation of the server's one store.
 */
class FleetStandIn implements CelldFleetLink {
  revision = 7;
  reconciles = 0;
  server: ServerHandle | undefined;
  inventoryRevision(): number {
    return this.revision;
  }
  startReconcile(req: { beforeRevision: number; dryRun: boolean; actor: string }): Promise<{ operationId: string } | { plan: unknown }> {
    if (req.beforeRevision !== this.revision) {
      return Promise.reject(
        Object.assign(new Error(`before_revision ${req.beforeRevision} is stale: the inventory is at ${this.revision}`), {
          code: 'fleet.stale_inventory_revision',
        }),
      );
    }
    if (req.dryRun) return Promise.resolve({ plan: { inventory_revision: this.revision, steps: [] } });
    this.reconciles++;
    const op = this.server!.service('operations').begin('vm_restart', 'fleet');
    op.start();
    this.revision++;
    setImmediate(() => op.complete({ actions: [], actor: req.actor }));
    return Promise.resolve({ operationId: op.id });
  }
}

function components(fleet?: CelldFleetLink): Component[] {
  return [
    authComponent,
    eventsComponent(),
    operationsComponent(),
    actorsComponent,
    agentsComponent,
    jobsComponent,
    hypervisorComponent,
    adminListenerComponent,
    bootstrapComponent(),
    agentListenerComponent,
    vmsComponent({ agentConnectTimeoutMs: 90_000 }),
    checkpointsComponent(),
    celldComponent(fleet === undefined ? {} : { fleet: () => fleet }),
  ];
}

const codeOf = (r: InjectResponse): string => String(((r.json() as Json)['error'] as Json | undefined)?.['code']);

describe('celld', () => {
  const dirs: string[] = [];
  const servers: ServerHandle[] = [];
  async function serve(env: Record<string, string>, fleet?: FleetStandIn): Promise<ServerHandle> {
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-celld-'));
    dirs.push(dir);
    const config = loopbackConfig(dir, { SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000', ...env });
    const s = await startServer(config, pino({ level: 'silent' }), { components: components(fleet) });
    servers.push(s);
    if (fleet !== undefined) fleet.server = s;
    return s;
  }
  const call = (s: ServerHandle, method: string, url: string, body?: unknown): Promise<InjectResponse> =>
    inject(s.router, { method, url, headers: {}, ...(body !== undefined ? { body } : {}) });

  after(async () => {
    for (const s of servers) await s.stop();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  describe('off or unconfigured', () => {
    test('off (the default): status says disabled without paths; every command is 503 celld.disabled; validate still answers', async () => {
      const s = await serve({});
      const r = await call(s, 'GET', '/api/v2/celld/status');
      assert.equal(r.status, 200, r.text);
      const st = r.json() as CelldStatus;
      assert.equal(st.enabled, false);
      assert.equal(st.readiness, 'disabled');
      assert.equal(st.reason_code, 'celld.disabled');
      assert.equal(st.commands.command, false);
      assert.equal(st.commands.validate, true);
      assert.equal(st.hypervisor.providers[0]?.provider, 'test');
      assert.ok(!r.text.includes(s.config.stateDir), 'status shows the state directory');
      assert.ok(!r.text.includes('test:///'), 'status shows a hypervisor URI');
      for (const [method, url, body] of [
        ['POST', '/api/v2/celld/preflight', {}],
        ['POST', '/api/v2/celld/diagnose', {}],
        ['POST', '/api/v2/celld/plan-upgrade', { to: '9.9.9' }],
        ['POST', `/api/v2/celld/cells/${CELL}/commands`, { operation_id: 'x' }],
        ['POST', `/api/v2/celld/cells/${CELL}/reconcile`, { operation_id: 'x', generation: 1 }],
        ['GET', `/api/v2/celld/cells/${CELL}`, undefined],
      ] as const) {
        const refused = await call(s, method, url, body);
        assert.equal(refused.status, 503, `${method} ${url}: ${refused.text}`);
        assert.equal(codeOf(refused), 'celld.disabled', url);
      }
      const v = await call(s, 'POST', '/api/v2/celld/validate', { schema_version: 'sandboxd.celld-command/v1' });
      assert.equal(v.status, 200, v.text);
      assert.equal((v.json() as Json)['valid'], false);
    });

    test('on without a cell id: degraded, celld.not_configured on every command', async () => {
      const s = await serve({ SVC_CELLD_ENABLED: '1' });
      const st = (await call(s, 'GET', '/api/v2/celld/status')).json() as CelldStatus;
      assert.equal(st.readiness, 'degraded');
      assert.equal(st.reason_code, 'celld.not_configured');
      assert.equal(st.configured, false);
      const r = await call(s, 'POST', `/api/v2/celld/cells/${CELL}/commands`, {});
      assert.equal(r.status, 503);
      assert.equal(codeOf(r), 'celld.not_configured');
      assert.equal(codeOf(await call(s, 'POST', '/api/v2/celld/preflight', {})), 'celld.not_configured');
    });
  });

  describe('enabled and configured', () => {
    let s: ServerHandle;
    const fleet = new FleetStandIn();
    const vmA = uniqueName('celld-a');
    const vmB = uniqueName('celld-b');
    const stray = uniqueName('celld-stray');

    const doc = (operationId: string, action: string, extra: Json): Json => ({
      schema_version: 'sandboxd.celld-command/v1',
      operation_id: operationId,
      cell_id: CELL,
      action,
      ...extra,
    });
    const command = (body: unknown): Promise<InjectResponse> => call(s, 'POST', `/api/v2/celld/cells/${CELL}/commands`, body);
    const record = async (id: string): Promise<CellCommandRecord> =>
      waitFor(
        `command ${id} finished`,
        async () => {
          const r = (await call(s, 'GET', `/api/v2/celld/cells/${CELL}/commands/${id}`)).json() as CellCommandRecord;
          return r.status === 'succeeded' || r.status === 'failed' || r.status === 'unknown' ? r : null;
        },
        { deadlineMs: DEADLINE_MS.local, intervalMs: 50 },
      );
    const state = async (name: string): Promise<string | undefined> => (await s.hypervisor.get(name))?.state;

    /** Everything a mutating call could change: VMs and their states, agents, ledger entries, operations. */
    async function world(): Promise<string> {
      const vms = (await s.hypervisor.list()).map((d) => `${d.name}:${d.state}`).sort();
      const agents = s.agents.registry
        .list()
        .map((a) => `${a.id}:${a.status}`)
        .sort();
      const cell = (await call(s, 'GET', `/api/v2/celld/cells/${CELL}`)).json() as Json;
      return JSON.stringify({ vms, agents, commands: cell['commands'], ops: s.service('operations').store.size });
    }

    before(async () => {
      s = await serve({ SVC_CELLD_ENABLED: '1', SVC_CELLD_CELL_ID: CELL }, fleet);
      // Two VMs the cell commands act on (defined stopped) and one running VM whose agent never connects.
      for (const n of [vmA, vmB, stray]) await s.hypervisor.define({ name: n, vcpus: 1, memoryMiB: 128 });
      await s.hypervisor.startDomain(stray);
    });

    test('status: secure (the admin listener is mTLS), the libvirt backend, the cell, the providers and versions', async () => {
      const r = await call(s, 'GET', '/api/v2/celld/status');
      const st = r.json() as CelldStatus;
      assert.equal(st.readiness, 'secure', r.text);
      assert.equal(st.reason_code, null);
      assert.equal(st.backend, 'libvirt');
      assert.equal(st.cell_id, CELL);
      assert.equal(st.agent_listener.listening, true);
      assert.equal(st.fleet.linked, true);
      assert.equal(st.fleet.inventory_revision, fleet.revision);
      assert.deepEqual(st.hypervisor.providers[0]?.capabilities, { snapshot: false, checkpoint: true, fork: false, warm_pool: true });
      assert.match(st.versions.sandboxd, /^\d+\.\d+\.\d+/);
      assert.ok(Object.values(st.commands).every((v) => v));
      assert.ok(!r.text.includes(s.config.stateDir));
    });

    test('a viewer (an mTLS operator with no role) reads status and runs checks, but its commands are 403 and change nothing', async () => {
      const viewer = { transport: 'mtls' as const, spiffeId: `spiffe://${s.config.trustDomain}/operator/vera`, fingerprint256: 'AA' };
      const as = (method: string, url: string, body?: unknown): Promise<InjectResponse> =>
        inject(s.router, { method, url, headers: {}, peer: viewer, ...(body !== undefined ? { body } : {}) });
      assert.equal((await as('GET', '/api/v2/celld/status')).status, 200);
      assert.equal((await as('POST', '/api/v2/celld/diagnose', {})).status, 200);
      const denied = await as('POST', `/api/v2/celld/cells/${CELL}/commands`, doc('op-viewer', 'start', { targets: [vmA] }));
      assert.equal(denied.status, 403, denied.text);
      assert.equal(codeOf(denied), 'auth.permission_denied');
      assert.equal(
        codeOf(await as('POST', `/api/v2/celld/cells/${CELL}/reconcile`, { operation_id: 'op-viewer', generation: 1 })),
        'auth.permission_denied',
      );
      assert.equal(codeOf(await call(s, 'GET', `/api/v2/celld/cells/${CELL}/commands/op-viewer`)), 'celld.command_not_found');
      assert.equal(await state(vmA), 'stopped');
    });

    test('validate, preflight, diagnose and plan-upgrade change nothing, and report the cell as it is', async () => {
      const before = await world();

      const good = doc('op-check-1', 'start', { targets: [vmA] });
      const v = (await call(s, 'POST', '/api/v2/celld/validate', good)).json() as Json;
      assert.equal(v['valid'], true);
      assert.equal(v['request_hash'], requestHash(good));
      const bad = (
        await call(s, 'POST', '/api/v2/celld/validate', doc('op-check-2', 'start', { targets: ['Bad'], extra: 1 }))
      ).json() as Json;
      assert.equal(bad['valid'], false);
      assert.deepEqual(
        (bad['problems'] as { path: string }[]).map((p) => p.path),
        ['/extra', '/targets/0'],
      );
      assert.equal(await world(), before, 'validate changed something');

      const pf = (await call(s, 'POST', '/api/v2/celld/preflight', { document: good })).json() as PreflightReport;
      assert.equal(pf.ok, true, JSON.stringify(pf));
      assert.deepEqual(
        pf.checks.map((c) => [c.name, c.status]),
        [
          ['document', 'pass'],
          ['hypervisor', 'pass'],
          ['agent_listener', 'pass'],
          ['images', 'skip'],
          ['targets', 'pass'],
          ['capacity', 'pass'],
        ],
      );
      const missing = (
        await call(s, 'POST', '/api/v2/celld/preflight', { document: doc('op-check-3', 'stop', { targets: ['agent-nobody-here'] }) })
      ).json() as PreflightReport;
      assert.equal(missing.ok, false);
      assert.equal(missing.checks.find((c) => c.name === 'targets')?.status, 'fail');
      const stale = (
        await call(s, 'POST', '/api/v2/celld/preflight', { document: doc('op-check-4', 'reconcile', { generation: fleet.revision - 1 }) })
      ).json() as PreflightReport;
      assert.equal(stale.checks.find((c) => c.name === 'fleet')?.status, 'fail');
      assert.equal(await world(), before, 'preflight changed something');

      const dg = (await call(s, 'POST', '/api/v2/celld/diagnose', {})).json() as DiagnoseReport;
      assert.equal(dg.healthy, false);
      assert.deepEqual(
        dg.findings.filter((f) => [vmA, vmB, stray].includes(f.vm)).map((f) => [f.kind, f.vm]),
        [['vm_running_without_agent', stray]],
      );
      assert.equal(await world(), before, 'diagnose changed something');

      const same = (await call(s, 'POST', '/api/v2/celld/plan-upgrade', { to: AGENT_VERSION })).json() as UpgradePlan;
      assert.equal(same.kind, 'none');
      const up = (await call(s, 'POST', '/api/v2/celld/plan-upgrade', { to: bump(AGENT_VERSION) })).json() as UpgradePlan;
      assert.equal(up.kind, 'upgrade');
      assert.equal(up.qualified, true);
      assert.equal(up.mutating, false);
      assert.ok(up.running_vms >= 1);
      assert.ok(up.steps.length > 0);
      const major = (await call(s, 'POST', '/api/v2/celld/plan-upgrade', { to: '99.0.0' })).json() as UpgradePlan;
      assert.equal(major.kind, 'refused');
      const junk = await call(s, 'POST', '/api/v2/celld/plan-upgrade', { to: 'latest' });
      assert.equal(junk.status, 400);
      assert.equal(codeOf(junk), 'request.invalid');
      assert.equal(await world(), before, 'plan-upgrade changed something');
    });

    test('a command runs once: its exact document replays the stored outcome, any other document with its id is a conflict', async () => {
      const start = doc('op-start-b', 'start', { targets: [vmB] });
      const r = await command(start);
      assert.equal(r.status, 202, r.text);
      const first = r.json() as CellCommandAccepted;
      assert.equal(first.replayed, false);
      assert.equal(first.command.request_hash, requestHash(start));
      assert.equal(r.headers['location'], `/api/v2/admin/operations/${first.command.management_operation_id}`);
      const done = await record('op-start-b');
      assert.equal(done.status, 'succeeded', JSON.stringify(done));
      assert.deepEqual(done.outcome, { action: 'start', effects: [{ vm: vmB, outcome: 'changed', state: 'running' }] });
      assert.equal(await state(vmB), 'running');
      const op = (await call(s, 'GET', r.headers['location'] ?? '')).json() as AdminOperation;
      assert.equal(op.type, 'celld_command');
      assert.equal(op.status, 'completed');

      // Behind the cell's back the VM is powered off; the replay must not start it again.
      await s.hypervisor.destroyDomain(vmB);
      const reordered = Object.fromEntries(Object.entries(start).reverse());
      const replay = await command({ ...reordered, request_hash: requestHash(start) });
      assert.equal(replay.status, 200, replay.text);
      assert.equal(replay.headers['celld-replayed'], 'true');
      const again = replay.json() as CellCommandAccepted;
      assert.equal(again.replayed, true);
      assert.deepEqual(again.command, done);
      assert.equal(await state(vmB), 'stopped', 'the replay started the VM a second time');

      const conflict = await command(doc('op-start-b', 'start', { targets: [vmA] }));
      assert.equal(conflict.status, 409, conflict.text);
      assert.equal(codeOf(conflict), 'celld.operation_conflict');
      assert.equal(await state(vmA), 'stopped');

      const forged = await command({ ...doc('op-start-a', 'start', { targets: [vmA] }), request_hash: requestHash(start) });
      assert.equal(forged.status, 400);
      assert.equal(codeOf(forged), 'celld.request_hash_mismatch');
      const invalid = await command(doc('op-bad', 'start', { targets: [] }));
      assert.equal(invalid.status, 400);
      assert.equal(codeOf(invalid), 'celld.document_invalid');
      const elsewhere = await call(s, 'POST', '/api/v2/celld/cells/cell-b/commands', doc('op-x', 'start', { targets: [vmA] }));
      assert.equal(elsewhere.status, 404);
      assert.equal(codeOf(elsewhere), 'celld.cell_not_found');
      // None of the refused requests reached the ledger or the VM.
      for (const id of ['op-start-a', 'op-bad', 'op-x']) {
        assert.equal(codeOf(await call(s, 'GET', `/api/v2/celld/cells/${CELL}/commands/${id}`)), 'celld.command_not_found');
      }
      assert.equal(await state(vmA), 'stopped');
      const metrics = await s.metrics.registry.metrics();
      assert.match(metrics, /svc_celld_commands_total\{action="start",outcome="accepted"\} 1\b/);
      assert.match(metrics, /svc_celld_commands_total\{action="start",outcome="replayed"\} 1\b/);
      assert.match(metrics, /svc_celld_commands_total\{action="start",outcome="refused"\} 1\b/);
    });

    test('a lost answer is an unknown outcome, resolved by the scoped ledger read', async () => {
      // The client sends and never reads the answer (it was lost on the way back).
      void command(doc('op-lost-1', 'start', { targets: [vmA] }));
      const seen = await record('op-lost-1');
      assert.equal(seen.status, 'succeeded');
      assert.deepEqual(seen.outcome, { action: 'start', effects: [{ vm: vmA, outcome: 'changed', state: 'running' }] });
      assert.equal(await state(vmA), 'running');
      // A command the server never accepted reads as not found: sending it is safe.
      const never = await call(s, 'GET', `/api/v2/celld/cells/${CELL}/commands/op-never-sent`);
      assert.equal(never.status, 404);
      assert.equal(codeOf(never), 'celld.command_not_found');
      // The read is scoped to the cell.
      assert.equal(codeOf(await call(s, 'GET', '/api/v2/celld/cells/cell-b/commands/op-lost-1')), 'celld.cell_not_found');
    });

    test('reconcile through Celld: a document reconcile replays, a generation-only one runs once and is refused after', async () => {
      const dry = doc('op-rec-dry', 'reconcile', { generation: fleet.revision, dry_run: true });
      assert.equal((await command(dry)).status, 202);
      const planned = await record('op-rec-dry');
      assert.equal(planned.status, 'succeeded');
      assert.equal((planned.outcome as Json)['dry_run'], true);
      const replay = await command(dry);
      assert.equal(replay.status, 200);
      assert.equal((replay.json() as CellCommandAccepted).replayed, true);

      const before = fleet.reconciles;
      const gen = { operation_id: 'op-rec-gen', generation: fleet.revision };
      const r = await call(s, 'POST', `/api/v2/celld/cells/${CELL}/reconcile`, gen);
      assert.equal(r.status, 202, r.text);
      assert.equal((r.json() as CellCommandAccepted).command.replayable, false);
      const done = await record('op-rec-gen');
      assert.equal(done.status, 'succeeded', JSON.stringify(done));
      assert.equal(done.kind, 'generation_only');
      assert.equal((done.outcome as Json)['fleet_status'], 'completed');
      assert.equal(fleet.reconciles, before + 1);

      const again = await call(s, 'POST', `/api/v2/celld/cells/${CELL}/reconcile`, gen);
      assert.equal(again.status, 409, again.text);
      assert.equal(codeOf(again), 'celld.replay_refused');
      assert.equal(fleet.reconciles, before + 1, 'a generation-only reconcile ran twice');
      // Its id cannot be reused by a document either, and a document's id not by a generation-only one.
      assert.equal(codeOf(await command(doc('op-rec-gen', 'reconcile', { generation: fleet.revision }))), 'celld.replay_refused');
      assert.equal(
        codeOf(await call(s, 'POST', `/api/v2/celld/cells/${CELL}/reconcile`, { operation_id: 'op-rec-dry', generation: fleet.revision })),
        'celld.operation_conflict',
      );
      // A stale generation is accepted into the ledger and fails there with the fleet's code.
      assert.equal((await command(doc('op-rec-stale', 'reconcile', { generation: 1 }))).status, 202);
      const stale = await record('op-rec-stale');
      assert.equal(stale.status, 'failed');
      assert.equal(stale.error?.code, 'fleet.stale_inventory_revision');
      const extra = await call(s, 'POST', `/api/v2/celld/cells/${CELL}/reconcile`, { ...gen, operation_id: 'op-rec-x', dry_run: true });
      assert.equal(codeOf(extra), 'celld.document_invalid');
    });

    test('provider capabilities: the test driver advertises checkpoint and warm_pool; withheld ones are refused by their routes', async () => {
      const r = await call(s, 'GET', '/api/v2/admin/hypervisor/capabilities');
      assert.equal(r.status, 200, r.text);
      const caps = r.json() as CapabilitiesResponse;
      assert.deepEqual(caps.providers[0]?.capabilities, { snapshot: false, checkpoint: true, fork: false, warm_pool: true });
      assert.deepEqual(caps.vms[stray], ['checkpoint', 'warm_pool']);
      assert.ok(!r.text.includes('test:///'));
      // Here the provider advertises checkpoints: the request reaches the checkpoint service (which
      // has its own reason to refuse a VM not created for it).
      const here = await call(s, 'POST', '/api/v2/admin/hypervisor/checkpoints', {
        vm: stray,
        checkpoint_id: 'ck-celld-1',
        pre_enrollment: true,
      });
      assert.notEqual(codeOf(here), 'provider.capability_unavailable', here.text);

      const narrow = await serve({ SVC_HYPERVISOR_WITHHELD_CAPABILITIES: 'checkpoint' });
      const withheld = (await call(narrow, 'GET', '/api/v2/admin/hypervisor/capabilities')).json() as CapabilitiesResponse;
      assert.deepEqual(withheld.providers[0]?.capabilities, { snapshot: false, checkpoint: false, fork: false, warm_pool: false });
      assert.match(withheld.providers[0]?.reasons.checkpoint ?? '', /withheld/);
      assert.deepEqual(withheld.vms[stray], []);
      const refused = await call(narrow, 'POST', '/api/v2/admin/hypervisor/checkpoints', {
        vm: stray,
        checkpoint_id: 'ck-celld-2',
        pre_enrollment: true,
      });
      assert.equal(refused.status, 409, refused.text);
      assert.equal(codeOf(refused), 'provider.capability_unavailable');
      assert.equal(await state(stray), 'running', 'the refused checkpoint touched the VM');
      const st = (await call(narrow, 'GET', '/api/v2/celld/status')).json() as CelldStatus;
      assert.equal(st.hypervisor.providers[0]?.capabilities.checkpoint, false);
    });
  });
});

function bump(v: string): string {
  const [a, b, c] = v.split('.').map((x) => Number.parseInt(x, 10));
  return `${a ?? 0}.${b ?? 0}.${(c ?? 0) + 1}`;
}
