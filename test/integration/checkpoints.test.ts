/**
 * Pre-enrollment checkpoints and warm pools on real parts (README "Checkpoints and warm pools"): a
 * real sandboxd on the libvirt test driver with its operations store, bootstrap enrollment, mTLS
 * gRPC listener and real local sandbox-agent processes. A deferred-enrollment VM is saved by
 * libvirt, restored with a fresh identity, and its agent enrolls with a single-use token and is
 * Ready when the operation completes; 50 concurrent handoffs against a pool of 10 hand out exactly
 * 10 distinct VMs and refuse the rest cleanly, leaving no token or image behind; refill brings a
 * pool back to its size; an Idempotency-Key replay survives a restart byte for byte.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { CHECKPOINTS_DIR, checkpointsComponent } from '../../src/checkpoints/component.js';
import type { Config } from '../../src/config/schema.js';
import { inject, type InjectResponse } from '../../src/http/inject.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import type { Component } from '../../src/component/component.js';
import { bootstrapMaterialPath, vmPaths } from '../../src/vms/vm-paths.js';
import type { AdminAccepted, Checkpoint, WarmPool } from '../../src/wire/checkpoints.js';
import type { AdminOperation } from '../../src/wire/vms.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { uniqueName, vmServerComponents } from './vms-harness.js';

type Json = Record<string, unknown>;

const components = (): Component[] =>
  vmServerComponents({ admin: true, bootstrap: true, afterVms: [checkpointsComponent({ readyTimeoutMs: 90_000 })] });

describe('checkpoints and warm pools', () => {
  let dir: string;
  let config: Config;
  let server: ServerHandle;

  const req = (method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<InjectResponse> =>
    inject(server.router, { method, url, headers, ...(body !== undefined ? { body } : {}) });
  const codeOf = (r: InjectResponse): string => String(((r.json() as Json)['error'] as Json | undefined)?.['code']);

  async function operation(id: string): Promise<AdminOperation> {
    return waitFor(
      `operation ${id} finished`,
      async () => {
        const r = await req('GET', `/api/v2/admin/operations/${id}`);
        const op = r.json() as AdminOperation;
        return op.status === 'completed' || op.status === 'failed' ? op : null;
      },
      { deadlineMs: DEADLINE_MS.endToEnd, intervalMs: 100 },
    );
  }

  /** A running VM created with enrollment: deferred (its agent not started). */
  async function deferredVm(base: string): Promise<string> {
    const name = uniqueName(base);
    const r = await req('POST', '/api/v1/vms', { name, profile: 'basic', vcpus: 1, memory_mb: 256, disk_gb: 1, enrollment: 'deferred' });
    assert.equal(r.status, 202, r.text);
    const op = await waitFor(
      `create of ${name}`,
      async () => {
        const o = (
          await req('GET', `/api/v1/operations/${(r.json() as { operation: { id: string } }).operation.id}`)
        ).json() as AdminOperation;
        return o.status === 'completed' || o.status === 'failed' ? o : null;
      },
      { deadlineMs: DEADLINE_MS.endToEnd, intervalMs: 100 },
    );
    assert.equal(op.status, 'completed', op.error);
    return name;
  }

  async function checkpoint(vm: string, id: string): Promise<Checkpoint> {
    const r = await req('POST', '/api/v2/admin/hypervisor/checkpoints', { vm, checkpoint_id: id, pre_enrollment: true });
    assert.equal(r.status, 202, r.text);
    const op = await operation((r.json() as AdminAccepted).operation.id);
    assert.equal(op.status, 'completed', op.error);
    return (await req('GET', `/api/v2/admin/hypervisor/checkpoints/${id}`)).json() as Checkpoint;
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-checkpoints-'));
    config = loopbackConfig(dir, {
      SVC_ACTORS: 'workers',
      SVC_ACTOR_SHARDS: '1',
      SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000',
      SVC_HYPERVISOR_READ_BUDGET_MS: '20000',
    });
    server = await startServer(config, pino({ level: 'silent' }), { components: components() });
  });

  after(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('a deferred VM is checkpointed before enrollment and restored with a fresh identity; its agent is Ready when the operation completes', async () => {
    const vm = await deferredVm('ckpt');
    const detail = (await req('GET', `/api/v1/vms/${vm}`)).json() as { agent?: { connected: boolean }; uuid?: string };
    assert.notEqual(detail.agent?.connected, true, 'a deferred VM has no enrolled agent');
    const bad = await req('POST', '/api/v2/admin/hypervisor/checkpoints', { vm, checkpoint_id: 'c-bad', pre_enrollment: false });
    assert.equal(bad.status, 400);
    assert.equal(codeOf(bad), 'checkpoint.pre_enrollment_required');
    const missing = await req('POST', '/api/v2/admin/hypervisor/checkpoints', { vm, checkpoint_id: 'c-bad' });
    assert.equal(codeOf(missing), 'checkpoint.pre_enrollment_required');

    const accepted = await req('POST', '/api/v2/admin/hypervisor/checkpoints', { vm, checkpoint_id: 'c-one', pre_enrollment: true });
    assert.equal(accepted.status, 202);
    const opId = (accepted.json() as AdminAccepted).operation.id;
    assert.equal(accepted.headers['location'], `/api/v2/admin/operations/${opId}`);
    const taken = await operation(opId);
    assert.equal(taken.status, 'completed', taken.error);
    assert.equal(taken.type, 'checkpoint_create');
    const ck = (await req('GET', '/api/v2/admin/hypervisor/checkpoints/c-one')).json() as Checkpoint;
    assert.equal(ck.status, 'ready');
    assert.equal(ck.vm, vm);
    assert.equal((await req('GET', `/api/v1/vms/${vm}`)).status, 404, 'the image holds the VM now');

    const wrongName = await req('POST', '/api/v2/admin/hypervisor/checkpoints/c-one/restore', { name: 'agent-other' });
    assert.equal(wrongName.status, 400);
    assert.equal(codeOf(wrongName), 'checkpoint.name_mismatch');
    const restore = await req('POST', '/api/v2/admin/hypervisor/checkpoints/c-one/restore', { name: vm });
    assert.equal(restore.status, 202, restore.text);
    const restored = await operation((restore.json() as AdminAccepted).operation.id);
    assert.equal(restored.status, 'completed', restored.error);
    assert.equal(restored.type, 'checkpoint_restore');
    const result = restored.result as { instance_id: string; agent: { status: string; instance_id: string }; bootstrap: Json };
    assert.equal(ck.restored_instance_id, null);
    assert.match(detail.uuid ?? '', /^[0-9a-f-]{36}$/);
    assert.notEqual(result.instance_id, detail.uuid, 'a fresh instance id (the old VM uuid was its instance id)');
    const restoredVm = (await req('GET', `/api/v1/vms/${vm}`)).json() as { uuid: string };
    assert.equal(restoredVm.uuid, result.instance_id, 'a fresh domain uuid too');
    assert.equal(result.agent.status, 'Ready');
    assert.equal(result.agent.instance_id, result.instance_id);
    const agent = server.agents.registry.get(vm);
    assert.equal(agent?.instance_id, result.instance_id, 'the agent registered with the fresh instance id');
    assert.deepEqual(Object.keys(result.bootstrap).sort(), ['expires_at', 'token_id'], 'no raw token in the operation');
    const vmNow = (await req('GET', `/api/v1/vms/${vm}`)).json() as { state: string };
    assert.equal(vmNow.state, 'running');
    const again = await req('POST', '/api/v2/admin/hypervisor/checkpoints/c-one/restore', {});
    assert.equal(again.status, 409);
    assert.equal(codeOf(again), 'checkpoint.not_ready');
    const enrolled = await req('POST', '/api/v2/admin/hypervisor/checkpoints', { vm, checkpoint_id: 'c-two', pre_enrollment: true });
    assert.equal(enrolled.status, 409, 'an enrolled VM cannot be checkpointed pre-enrollment');
    assert.equal(codeOf(enrolled), 'checkpoint.vm_enrolled');
  });

  test('a restore whose VM name was taken again fails cleanly and leaves that VM and its agent alone', async () => {
    const vm = await deferredVm('taken');
    await checkpoint(vm, 'taken-one');
    const again = await req('POST', '/api/v1/vms', { name: vm, profile: 'basic', vcpus: 1, memory_mb: 256, disk_gb: 1 });
    assert.equal(again.status, 202, again.text);
    await waitFor('the new VM of that name has its agent', () => server.agents.registry.get(vm)?.status === 'Ready', {
      deadlineMs: DEADLINE_MS.agent,
    });
    const before = server.agents.registry.get(vm)?.instance_id;
    const restore = await req('POST', '/api/v2/admin/hypervisor/checkpoints/taken-one/restore', {});
    assert.equal(restore.status, 202);
    const op = await operation((restore.json() as AdminAccepted).operation.id);
    assert.equal(op.status, 'failed');
    assert.equal(op.error_code, 'VM_ALREADY_EXISTS');
    const ck = (await req('GET', '/api/v2/admin/hypervisor/checkpoints/taken-one')).json() as Checkpoint;
    assert.equal(ck.status, 'failed');
    const agent = server.agents.registry.get(vm);
    assert.equal(agent?.status, 'Ready', 'the other VM keeps its agent');
    assert.equal(agent.instance_id, before);
    assert.equal(((await req('GET', `/api/v1/vms/${vm}`)).json() as { state: string }).state, 'running');
  });

  test('deleting a VM removes the bootstrap material staged for it and revokes its token', async () => {
    const vm = await deferredVm('revoke');
    const material = bootstrapMaterialPath(vmPaths(dir, vm).dir);
    const bootstrap = server.service('bootstrap');
    const before = bootstrap.counts();
    await bootstrap.stage({ instanceId: `inst-${vm}`, agentId: vm, file: material });
    assert.equal(bootstrap.counts().active, before.active + 1);
    const del = await req('DELETE', `/api/v1/vms/${vm}?force=true`);
    assert.equal(del.status, 200, del.text);
    assert.equal(existsSync(material), false, 'the material is gone with the VM');
    assert.equal(bootstrap.counts().active, before.active);
    assert.equal(bootstrap.counts().revoked, before.revoked + 1);
  });

  test('50 concurrent handoffs against a pool of 10: exactly 10 distinct Ready VMs, 40 clean refusals, nothing left over', async () => {
    const vms = await Promise.all(Array.from({ length: 10 }, (_, i) => deferredVm(`pool${i}`)));
    const ids = vms.map((_, i) => `slot-${i}`);
    await Promise.all(vms.map((vm, i) => checkpoint(vm, ids[i] ?? '')));
    const created = await req('POST', '/api/v2/admin/hypervisor/warm-pools', { pool: 'fifty', checkpoint_ids: ids, target_size: 0 });
    assert.equal(created.status, 202, created.text);
    assert.equal((await operation((created.json() as AdminAccepted).operation.id)).status, 'completed');
    const pool = (await req('GET', '/api/v2/admin/hypervisor/warm-pools/fifty')).json() as WarmPool;
    assert.equal(pool.ready_slots, 10);

    const answers = await Promise.all(
      Array.from({ length: 50 }, () => req('POST', '/api/v2/admin/hypervisor/warm-pools/fifty/handoff', {})),
    );
    const ok = answers.filter((a) => a.status === 202);
    const refused = answers.filter((a) => a.status !== 202);
    assert.equal(ok.length, 10);
    for (const r of refused) {
      assert.equal(r.status, 409);
      assert.equal(codeOf(r), 'warm_pool.empty');
      assert.equal(r.headers['retry-after'], '5');
    }
    const done = await Promise.all(ok.map((a) => operation((a.json() as AdminAccepted).operation.id)));
    const names = new Set<string>();
    for (const op of done) {
      assert.equal(op.status, 'completed', op.error);
      const r = op.result as { vm: { name: string }; instance_id: string; agent: { status: string } };
      assert.equal(r.agent.status, 'Ready');
      assert.equal(server.agents.registry.get(r.vm.name)?.instance_id, r.instance_id);
      names.add(r.vm.name);
    }
    assert.deepEqual([...names].sort(), [...vms].sort(), 'each slot handed out once, under its own VM name');
    const after = (await req('GET', '/api/v2/admin/hypervisor/warm-pools/fifty')).json() as WarmPool;
    assert.equal(after.ready_slots, 0);
    assert.equal(after.restoring, 0);
    assert.equal(after.handoffs_total, 10);
    assert.equal(server.service('bootstrap').counts().active, 0, 'every staged token was consumed');
    for (const id of ids) {
      const files = await readdir(join(dir, CHECKPOINTS_DIR, id));
      assert.deepEqual(
        files.filter((f) => f.startsWith('restore-')),
        [],
        'no rewritten image left behind',
      );
    }
    const metrics = await server.metrics.registry.metrics();
    assert.match(metrics, /svc_warm_pool_handoffs_total\{pool="fifty",outcome="completed"\} 10/);
    assert.match(metrics, /svc_warm_pool_handoffs_total\{pool="fifty",outcome="empty"\} 40/);
    assert.match(metrics, /svc_warm_pool_ready_slots\{pool="fifty"\} 0/);
    assert.match(metrics, /svc_warm_pool_handoff_seconds_count\{pool="fifty"\} 10/);
  });

  test('refill keeps a pool at its target size after a handoff', async () => {
    const vm = await deferredVm('refill');
    await checkpoint(vm, 'refill-seed');
    const created = await req('POST', '/api/v2/admin/hypervisor/warm-pools', {
      pool: 'refill',
      checkpoint_ids: ['refill-seed'],
      target_size: 1,
    });
    assert.equal(created.status, 202);
    const handoff = await req('POST', '/api/v2/admin/hypervisor/warm-pools/refill/handoff', {});
    assert.equal(handoff.status, 202, handoff.text);
    assert.equal((await operation((handoff.json() as AdminAccepted).operation.id)).status, 'completed');
    const refilled = await waitFor(
      'the pool refilled to one ready slot',
      async () => {
        const p = (await req('GET', '/api/v2/admin/hypervisor/warm-pools/refill')).json() as WarmPool;
        return p.ready_slots === 1 ? p : null;
      },
      { deadlineMs: DEADLINE_MS.endToEnd, intervalMs: 200 },
    );
    const slot = (await req('GET', `/api/v2/admin/hypervisor/checkpoints/${refilled.checkpoint_ids[0] ?? ''}`)).json() as Checkpoint;
    assert.equal(slot.status, 'reserved');
    assert.equal(slot.pool, 'refill');
    assert.match(slot.vm, /^agent-refill-[0-9a-f]{8}$/);
  });

  test('an Idempotency-Key replay after a restart returns the original status, headers and body bytes', async () => {
    const url = `http://127.0.0.1:${server.ports.http}/api/v2/admin/hypervisor/warm-pools/nope/handoff`;
    const vm = await deferredVm('idem');
    const post = (port: number) =>
      fetch(`http://127.0.0.1:${port}/api/v2/admin/hypervisor/checkpoints`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'restart-key' },
        body: JSON.stringify({ vm, checkpoint_id: 'idem-one', pre_enrollment: true }),
      });
    const first = await post(server.ports.http);
    const firstBody = await first.text();
    assert.equal(first.status, 202);
    assert.equal(first.headers.get('idempotency-replayed'), null);
    const conflict = await fetch(`http://127.0.0.1:${server.ports.http}/api/v2/admin/hypervisor/checkpoints`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'restart-key' },
      body: JSON.stringify({ vm, checkpoint_id: 'idem-two', pre_enrollment: true }),
    });
    assert.equal(conflict.status, 409);
    assert.equal(((await conflict.json()) as { error: { code: string } }).error.code, 'idempotency.key_conflict');
    await operation((JSON.parse(firstBody) as AdminAccepted).operation.id);
    assert.equal((await fetch(url, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).status, 404);
    await server.stop();
    server = await startServer(config, pino({ level: 'silent' }), { components: components() });
    const replay = await post(server.ports.http);
    assert.equal(replay.status, 202);
    assert.equal(replay.headers.get('idempotency-replayed'), 'true');
    assert.equal(replay.headers.get('location'), first.headers.get('location'));
    assert.equal(replay.headers.get('content-type'), first.headers.get('content-type'));
    assert.equal(await replay.text(), firstBody);
    const ck = (await req('GET', '/api/v2/admin/hypervisor/checkpoints/idem-one')).json() as Checkpoint;
    assert.equal(ck.status, 'ready', 'the checkpoint outlived the restart');
  });
});
