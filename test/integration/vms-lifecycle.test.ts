/**
 * The VM API end to end on test:///default with worker-shard queue actors: create → operation
 * completes → running with its local agent → stop → start → restart (graceful, hard) →
 * deploy-agent → destroy → delete, with and without force and delete_disk; the local agent
 * process runs with the right flags and stops with its VM; events land in the store.
 */
import assert from 'node:assert/strict';
import { readFile, readlink, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { processAlive, startVmHarness, uniqueName, type VmHarness } from './vms-harness.js';

type Json = Record<string, unknown>;

async function cmdline(pid: number): Promise<string[]> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter((s) => s !== '');
}

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
}

async function waitGone(pid: number): Promise<void> {
  await waitFor(`process ${pid} to be gone`, () => !processAlive(pid), { deadlineMs: DEADLINE_MS.process, intervalMs: 50 });
}

describe('VM lifecycle through the API (test:///default, worker shards)', () => {
  let h: VmHarness;
  before(async () => {
    h = await startVmHarness({ mode: 'workers' });
  });
  after(async () => {
    await h.stop();
  });

  test('create → running with agent → stop → start → restart → deploy-agent → destroy → delete', async () => {
    const name = uniqueName('life');
    const created = await h.req('POST', '/api/v1/vms', { name, profile: 'basic', vcpus: 2, memory_mb: 1024, disk_gb: 10 });
    assert.equal(created.status, 202, created.text);
    const env = created.json() as { operation: Json; vm: null };
    assert.equal(env.vm, null);
    assert.match(String(env.operation['id']), /^op-[0-9a-f-]{36}$/);
    assert.equal(env.operation['type'], 'vm_create');
    assert.equal(env.operation['status'], 'pending');
    assert.equal(env.operation['progress_percent'], 0);
    assert.equal(env.operation['target'], name);
    assert.equal(env.operation['result'], undefined);

    const op = await h.waitOp(String(env.operation['id']));
    assert.equal(op['status'], 'completed', JSON.stringify(op));
    assert.equal(op['progress_percent'], 100);
    assert.deepEqual(op['result'], { vm: { name, state: 'running' } });
    assert.ok(Date.parse(String(op['completed_at'])) >= Date.parse(String(op['created_at'])));
    assert.equal(op['error'], undefined);

    const detail = (await h.req('GET', `/api/v1/vms/${name}`)).json() as Json;
    assert.equal(detail['state'], 'running');
    assert.equal(detail['vcpus'], 2);
    assert.equal(detail['memory_mb'], 1024);
    assert.equal(detail['disk_gb'], 10);
    assert.equal(detail['profile'], 'basic');
    assert.equal(typeof detail['uptime_seconds'], 'number');
    assert.equal(detail['ip_address'], '127.0.0.1');
    const agent = detail['agent'] as Json;
    assert.equal(agent['connected'], true);
    assert.equal(typeof agent['connected_at'], 'number');
    assert.equal(agent['hostname'], `${name}.local`);
    const uuid = String(detail['uuid']);

    // The local agent: right flags, cwd, certificate, log.
    const a1 = h.svc.localAgents.info(name);
    assert.ok(a1 !== null && a1.running && processAlive(a1.pid));
    const args = await cmdline(a1.pid);
    const vmDir = join(h.stateDir, 'vms', name);
    assert.equal(flag(args, '--agent-id'), name);
    assert.equal(flag(args, '--instance-id'), uuid);
    assert.equal(flag(args, '--certs'), join(vmDir, 'certs'));
    assert.equal(flag(args, '--work-dir'), join(vmDir, 'work'));
    assert.equal(flag(args, '--profile'), 'basic');
    assert.match(flag(args, '--server') ?? '', /^127\.0\.0\.1:\d+$/);
    assert.ok(args.some((x) => x.endsWith('sandbox-agent.js')));
    assert.equal(await readlink(`/proc/${a1.pid}/cwd`), join(vmDir, 'work'));
    const firstCert = await readFile(join(vmDir, 'certs', 'agent.pem'), 'utf8');
    assert.match(firstCert, /BEGIN CERTIFICATE/);
    assert.equal((await stat(join(vmDir, 'certs', 'agent-key.pem'))).mode & 0o777, 0o600);
    await stat(join(vmDir, 'agent.log'));

    // stop: ACPI, state shutdown, agent stops; idempotent.
    const stop = await h.req('POST', `/api/v1/vms/${name}/stop`);
    assert.equal(stop.status, 200, stop.text);
    assert.deepEqual((stop.json() as Json)['vm'], { name, state: 'shutdown' });
    assert.match(String((stop.json() as Json)['message']), /graceful shutdown initiated/);
    await waitGone(a1.pid);
    assert.equal(h.svc.localAgents.info(name)?.running ?? false, false);
    assert.equal(((await h.req('GET', `/api/v1/vms/${name}`)).json() as Json)['state'], 'stopped');
    const stop2 = await h.req('POST', `/api/v1/vms/${name}/stop`);
    assert.equal(stop2.status, 200);
    assert.deepEqual((stop2.json() as Json)['vm'], { name, state: 'stopped' });

    // start: running, a new agent; idempotent.
    const start = await h.req('POST', `/api/v1/vms/${name}/start`);
    assert.equal(start.status, 200, start.text);
    assert.deepEqual((start.json() as Json)['vm'], { name, state: 'running' });
    const a2 = h.svc.localAgents.info(name);
    assert.ok(a2 !== null && a2.running && a2.pid !== a1.pid);
    const start2 = await h.req('POST', `/api/v1/vms/${name}/start`);
    assert.equal(start2.status, 200);
    assert.match(String((start2.json() as Json)['message']), /already running/);
    assert.equal(h.svc.localAgents.info(name)?.pid, a2.pid, 'an idempotent start keeps the agent');
    assert.equal(await readFile(join(vmDir, 'certs', 'agent.pem'), 'utf8'), firstCert, 'a start reuses a valid certificate');

    // restart graceful, then hard: each a vm_restart operation; the agent is restarted.
    for (const mode of ['graceful', 'hard'] as const) {
      const before = h.svc.localAgents.info(name)!.pid;
      const r = await h.req('POST', `/api/v1/vms/${name}/restart`, { mode, timeout_seconds: 5 });
      assert.equal(r.status, 202, r.text);
      const ro = (r.json() as { operation: Json }).operation;
      assert.equal(ro['type'], 'vm_restart');
      const done = await h.waitOp(String(ro['id']));
      assert.equal(done['status'], 'completed', JSON.stringify(done));
      assert.deepEqual((done['result'] as Json)['vm'], { name, state: 'running' });
      const now = h.svc.localAgents.info(name)!;
      assert.ok(now.running && now.pid !== before, `${mode} restart restarts the agent`);
      await waitGone(before);
    }

    // deploy-agent: reports vm_create; new certificate and process.
    const certBefore = await readFile(join(vmDir, 'certs', 'agent.pem'), 'utf8');
    const pidBefore = h.svc.localAgents.info(name)!.pid;
    const d = await h.req('POST', `/api/v1/vms/${name}/deploy-agent`);
    assert.equal(d.status, 202, d.text);
    const dop = (d.json() as { operation: Json }).operation;
    assert.equal(dop['type'], 'vm_create');
    assert.equal((await h.waitOp(String(dop['id'])))['status'], 'completed');
    assert.notEqual(h.svc.localAgents.info(name)!.pid, pidBefore);
    assert.notEqual(await readFile(join(vmDir, 'certs', 'agent.pem'), 'utf8'), certBefore);

    // destroy: stopped, agent gone; idempotent.
    const pidRunning = h.svc.localAgents.info(name)!.pid;
    const des = await h.req('POST', `/api/v1/vms/${name}/destroy`);
    assert.equal(des.status, 200, des.text);
    assert.deepEqual((des.json() as Json)['vm'], { name, state: 'stopped' });
    await waitGone(pidRunning);
    const des2 = await h.req('POST', `/api/v1/vms/${name}/destroy`);
    assert.equal(des2.status, 200);
    assert.match(String((des2.json() as Json)['message']), /already stopped/);

    // delete (stopped, no force, keep disk): certificates go, the working directory stays.
    const del = await h.req('DELETE', `/api/v1/vms/${name}`);
    assert.equal(del.status, 200, del.text);
    assert.deepEqual(del.json(), { deleted: true, name, disk_deleted: false });
    assert.equal((await h.req('GET', `/api/v1/vms/${name}`)).status, 404);
    await assert.rejects(stat(join(vmDir, 'certs')));
    await stat(join(vmDir, 'work'));

    // The event store saw the lifecycle and the operations, with vm_name set.
    const types = h.events.query({ vmName: name, limit: 1000 }).events.map((e) => e.event_type);
    for (const t of [
      'vm.defined',
      'vm.started',
      'vm.shutdown',
      'vm.stopped',
      'vm.undefined',
      'vm.operation.started',
      'vm.operation.completed',
    ]) {
      assert.ok(types.includes(t), `${t} in ${types.join(',')}`);
    }
  });

  test('DELETE ?force=true&delete_disk=true removes a running VM, stops its agent and removes its files', async () => {
    const name = uniqueName('force');
    await h.createVm(name);
    const pid = h.svc.localAgents.info(name)!.pid;
    const refused = await h.req('DELETE', `/api/v1/vms/${name}`);
    assert.equal(refused.status, 409);
    assert.equal((refused.json() as { error: Json }).error['code'], 'VM_RUNNING');
    assert.ok(processAlive(pid), 'a refused delete leaves the agent alone');

    const del = await h.req('DELETE', `/api/v1/vms/${name}?force=true&delete_disk=true`);
    assert.equal(del.status, 200, del.text);
    assert.deepEqual(del.json(), { deleted: true, name, disk_deleted: true });
    await waitGone(pid);
    await assert.rejects(stat(join(h.stateDir, 'vms', name)));
    assert.equal(await h.hv.get(name), null);
    // The name is free again: a new VM (a new queue actor) can take it.
    await h.createVm(name, { start: false });
    assert.equal(((await h.req('GET', `/api/v1/vms/${name}`)).json() as Json)['state'], 'stopped');
    assert.equal(h.svc.localAgents.info(name), null, 'start=false runs no agent');
    assert.equal((await h.req('DELETE', `/api/v1/vms/${name}?delete_disk=true`)).status, 200);
  });

  test("the reference dashboard's create body (empty profile and loadout) creates a running VM; polling reads state", async () => {
    const name = uniqueName('ref');
    const body = { name, profile: '', loadout: '', vcpus: 1, memory_mb: 512, disk_gb: 2, agentshare: false, start: true };
    const r = await h.req('POST', '/api/v1/vms', body);
    assert.equal(r.status, 202, r.text);
    const op = await h.waitOp(((r.json() as { operation: Json }).operation['id'] as string) ?? '');
    assert.deepEqual([op['state'], op['status']], ['completed', 'completed']);
    assert.equal(((await h.req('GET', `/api/v1/vms/${name}`)).json() as Json)['state'], 'running');
    const refused = await h.req('POST', '/api/v1/vms', { ...body, name: uniqueName('ref'), loadout: 'claude-code' });
    assert.equal(refused.status, 400);
    assert.match(String((refused.json() as { error: Json }).error['message']), /^loadout:/);
    assert.equal((await h.req('DELETE', `/api/v1/vms/${name}?force=true&delete_disk=true`)).status, 200);
  });

  test('list filters by state and prefix; * lists every VM', async () => {
    const a = uniqueName('lsa');
    const b = uniqueName('lsb');
    await h.createVm(a);
    await h.createVm(b, { start: false });
    const all = (await h.req('GET', '/api/v1/vms')).json() as { vms: Json[]; total: number };
    assert.equal(all.total, all.vms.length);
    assert.ok(
      all.vms.every((v) => String(v['name']).startsWith('agent-')),
      'default prefix agent-',
    );
    assert.ok(all.vms.some((v) => v['name'] === a) && all.vms.some((v) => v['name'] === b));
    assert.deepEqual(Object.keys(all.vms.find((v) => v['name'] === a)!).sort(), [
      'ip_address',
      'memory_mb',
      'name',
      'state',
      'uptime_seconds',
      'uuid',
      'vcpus',
    ]);
    const running = (await h.req('GET', '/api/v1/vms?state=running')).json() as { vms: Json[] };
    assert.ok(running.vms.some((v) => v['name'] === a) && !running.vms.some((v) => v['name'] === b));
    const stopped = (await h.req('GET', '/api/v1/vms?state=stopped')).json() as { vms: Json[] };
    assert.ok(stopped.vms.some((v) => v['name'] === b) && !stopped.vms.some((v) => v['name'] === a));
    const star = (await h.req('GET', '/api/v1/vms?prefix=*')).json() as { vms: Json[] };
    assert.ok(
      star.vms.some((v) => v['name'] === 'test'),
      'the predefined test domain with prefix=*',
    );
    const mine = (await h.req('GET', `/api/v1/vms?prefix=${a}`)).json() as { vms: Json[]; total: number };
    assert.deepEqual(
      mine.vms.map((v) => v['name']),
      [a],
    );
    for (const n of [a, b]) assert.equal((await h.req('DELETE', `/api/v1/vms/${n}?force=true&delete_disk=true`)).status, 200);
  });

  test("a VM stopped and started behind sandboxd's back: events, and its agent follows", async () => {
    const name = uniqueName('back');
    await h.createVm(name);
    const pid = h.svc.localAgents.info(name)!.pid;
    const { Hypervisor } = await import('@unraid/libvirt');
    const raw = new Hypervisor({ uri: 'test:///default' });
    await raw.connectOpen();
    try {
      const dom = await raw.domainLookupByName(name);
      await dom.destroy();
      await h.hv.pollNow();
      await waitGone(pid);
      const stoppedEvent = h.events.query({ vmName: name, eventType: 'vm.stopped', limit: 10 }).events.at(-1);
      assert.equal(stoppedEvent?.details['source'], 'poller');
      await dom.create();
      await h.hv.pollNow();
      await waitFor('the agent to be restarted after an outside start', () => h.svc.localAgents.info(name)?.running === true, {
        deadlineMs: DEADLINE_MS.process,
        intervalMs: 50,
        lastState: () => JSON.stringify(h.svc.localAgents.info(name)),
      });
    } finally {
      await raw.connectClose();
    }
    assert.equal((await h.req('DELETE', `/api/v1/vms/${name}?force=true&delete_disk=true`)).status, 200);
  });

  test('20 VMs created in parallel all reach running with their agents', async () => {
    const names = Array.from({ length: 20 }, (_, i) => `agent-par20-${i}-${Math.random().toString(36).slice(2, 6)}`);
    const t0 = performance.now();
    const accepted = await Promise.all(names.map((name) => h.req('POST', '/api/v1/vms', { name, vcpus: 1, memory_mb: 256 })));
    for (const r of accepted) assert.equal(r.status, 202, r.text);
    const ops = await Promise.all(accepted.map((r) => h.waitOp(String((r.json() as { operation: Json }).operation['id']), 120_000)));
    const ms = performance.now() - t0;
    for (const op of ops) assert.equal(op['status'], 'completed', JSON.stringify(op));
    const listed = (await h.req('GET', '/api/v1/vms?state=running&prefix=agent-par20-')).json() as { vms: Json[]; total: number };
    assert.equal(listed.total, 20);
    for (const n of names) {
      const a = h.svc.localAgents.info(n);
      assert.ok(a?.running === true && processAlive(a.pid), `${n} agent runs`);
      assert.equal((((await h.req('GET', `/api/v1/vms/${n}`)).json() as Json)['agent'] as Json)['connected'], true);
    }
    process.stdout.write(`# 20 VMs create-to-agent-ready in parallel (workers): ${ms.toFixed(0)} ms\n`);
    const pids = names.map((n) => h.svc.localAgents.info(n)!.pid);
    const dels = await Promise.all(names.map((n) => h.req('DELETE', `/api/v1/vms/${n}?force=true&delete_disk=true`)));
    for (const r of dels) assert.equal(r.status, 200, r.text);
    for (const pid of pids) await waitGone(pid);
  });
});
