/**
 * The per-VM operation queue through the API: operations on one VM apply in submission order
 * while another VM's work goes on in parallel; reprovision queues a deploy-agent; a queue actor
 * lost with its shard fails its operations instead of leaving them running; on start, running
 * managed VMs get their agents back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { vmOpsActorId } from '../../actors/protocol/vm-frames.js';
import { DEADLINE_MS, waitFor as waitForCondition } from '../support/wait.js';
import { processAlive, startVmHarness, uniqueName, type VmHarness } from './vms-harness.js';

type Json = Record<string, unknown>;

/** Waits until `cond` holds (the shared helper, polling every 20 ms). */
async function waitFor(what: string, cond: () => Promise<boolean> | boolean, deadlineMs: number = DEADLINE_MS.process): Promise<void> {
  await waitForCondition(what, cond, { deadlineMs, intervalMs: 20 });
}

for (const mode of ['workers', 'inline'] as const) {
  describe(`VM operation queue (${mode} actors)`, () => {
    let h: VmHarness;
    before(async () => {
      h = await startVmHarness({ mode });
    });
    after(async () => {
      await h.stop();
    });

    test('operations on one VM apply in order; another VM is not held up', async () => {
      const a = uniqueName('order');
      const b = uniqueName('other');
      await h.createVm(a);
      await h.createVm(b);
      h.connectDelayMs.set(a, 1500); // every agent (re)start of A takes 1.5 s to "connect"
      const mark = h.events.query({ limit: 1 }).last_event_id;

      const restart = await h.req('POST', `/api/v1/vms/${a}/restart`, { mode: 'hard' });
      assert.equal(restart.status, 202, restart.text);
      const stopP = h.req('POST', `/api/v1/vms/${a}/stop`);
      await waitFor('stop queued', async () => (await h.svc.queue(a)).length === 2);
      const startP = h.req('POST', `/api/v1/vms/${a}/start`);
      await waitFor('start queued', async () => (await h.svc.queue(a)).length === 3);
      const deploy = await h.req('POST', `/api/v1/vms/${a}/deploy-agent`);
      assert.equal(deploy.status, 202, deploy.text);
      const deployId = String((deploy.json() as { operation: Json }).operation['id']);
      const queued = (await h.req('GET', `/api/v1/operations/${deployId}`)).json() as Json;
      assert.equal(queued['status'], 'pending', 'a queued operation is pending until its turn');
      assert.deepEqual(
        (await h.svc.queue(a)).map((j) => j.kind),
        ['restart', 'stop', 'start', 'deploy_agent'],
      );

      // B is another actor: its stop finishes while A's restart still runs.
      const bStop = await h.req('POST', `/api/v1/vms/${b}/stop`);
      assert.equal(bStop.status, 200);
      assert.ok((await h.svc.queue(a)).length >= 3, 'A is still busy when B is done');

      const [stop, start] = await Promise.all([stopP, startP]);
      assert.equal(stop.status, 200, stop.text);
      assert.equal(start.status, 200, start.text);
      const restartOp = await h.waitOp(String((restart.json() as { operation: Json }).operation['id']));
      const deployOp = await h.waitOp(deployId);
      assert.equal(restartOp['status'], 'completed', JSON.stringify(restartOp));
      assert.equal(deployOp['status'], 'completed', JSON.stringify(deployOp));
      assert.ok(Date.parse(String(restartOp['completed_at'])) <= Date.parse(String(deployOp['completed_at'])));

      const lifecycle = h.events
        .query({ since: mark, vmName: a, limit: 1000 })
        .events.filter((e) => ['vm.started', 'vm.stopped', 'vm.shutdown'].includes(e.event_type))
        .map((e) => `${e.event_type}:${String(e.details['reason'])}`);
      assert.deepEqual(lifecycle, [
        'vm.stopped:destroyed',
        'vm.started:booted', // restart (hard)
        'vm.shutdown:requested',
        'vm.stopped:shutdown', // stop
        'vm.started:booted', // start
      ]);
      const ops = h.events
        .query({ since: mark, vmName: a, eventType: 'vm.operation.*', limit: 100 })
        .events.map((e) => `${e.event_type}:${String(e.details['job'])}`);
      assert.deepEqual(ops, [
        'vm.operation.started:restart',
        'vm.operation.completed:restart',
        'vm.operation.started:deploy_agent',
        'vm.operation.completed:deploy_agent',
      ]);
      h.connectDelayMs.delete(a);
      for (const n of [a, b]) assert.equal((await h.req('DELETE', `/api/v1/vms/${n}?force=true&delete_disk=true`)).status, 200);
    });

    test("reprovision(agentId) queues a deploy-agent operation for the agent's VM", async () => {
      const n = uniqueName('reprov');
      await h.createVm(n);
      const pid = h.svc.localAgents.info(n)!.pid;
      const r = await h.svc.reprovision(n);
      assert.equal(r.status, 'queued');
      assert.match(r.operation_id, /^op-/);
      const op = await h.waitOp(r.operation_id);
      assert.equal(op['status'], 'completed');
      assert.equal(op['type'], 'vm_create');
      assert.notEqual(h.svc.localAgents.info(n)!.pid, pid);
      assert.equal(op['target'], n, 'one ordinary operation, on the VM');
      // By instance id too.
      const uuid = String(((await h.req('GET', `/api/v1/vms/${n}`)).json() as Json)['uuid']);
      const byUuid = await h.waitOp((await h.svc.reprovision(uuid)).operation_id);
      assert.deepEqual([byUuid['status'], byUuid['target'], byUuid['result']], ['completed', n, { vm: { name: n, state: 'running' } }]);
      // An agent no VM runs: still queued (the POST answers 202), and the operation says why.
      const refused = await h.svc.reprovision('agent-nobody-here');
      assert.equal(refused.status, 'queued');
      const failed = await h.waitOp(refused.operation_id);
      assert.deepEqual(
        [failed['status'], failed['type'], failed['target'], failed['error_code']],
        ['failed', 'vm_create', 'agent-nobody-here', 'VM_NOT_FOUND'],
      );
      assert.equal((await h.req('DELETE', `/api/v1/vms/${n}?force=true&delete_disk=true`)).status, 200);
    });

    test('a queue actor lost with its shard fails its operations (actor.shard_restarted)', async () => {
      const n = uniqueName('lost');
      h.unreachable.add(n);
      const r = await h.req('POST', '/api/v1/vms', { name: n });
      const id = String((r.json() as { operation: Json }).operation['id']);
      await waitFor('create waiting for its agent', () => (h.svc.operations.get(id)?.progress_percent ?? 0) >= 70);
      h.svc.handleShardRestart(h.actors.shardOf(vmOpsActorId(n)), [vmOpsActorId(n)]);
      const op = (await h.req('GET', `/api/v1/operations/${id}`)).json() as Json;
      assert.equal(op['status'], 'failed');
      assert.equal(op['error_code'], 'actor.shard_restarted');
      assert.match(String(op['error']), /crashed/);
      h.unreachable.delete(n);
      await h.waitOp(id); // the actor (still alive here) finishing later changes nothing
      assert.equal(((await h.req('GET', `/api/v1/operations/${id}`)).json() as Json)['status'], 'failed');
      await waitFor('queue idle', async () => (await h.svc.queue(n)).length === 0, 30_000);
      assert.equal((await h.req('DELETE', `/api/v1/vms/${n}?force=true&delete_disk=true`)).status, 200);
    });
  });
}

describe('VM service start', () => {
  test('running managed VMs get their local agents started; stop() stops them all', async () => {
    const h = await startVmHarness({ mode: 'inline' });
    const n = uniqueName('resume');
    let second: VmHarness | undefined;
    try {
      await h.createVm(n);
      const first = h.svc.localAgents.info(n)!.pid;
      await h.svc.stop();
      assert.ok(!processAlive(first), 'stop() stopped the agent');
      // A second VM service on the same state dir (and the process's one test:///default).
      second = await startVmHarness({ mode: 'inline', stateDir: h.stateDir });
      const resumed = second.svc.localAgents.info(n);
      assert.ok(resumed?.running === true && resumed.pid !== first, 'the running VM has its agent again');
      await second.svc.stop();
      assert.ok(!processAlive(resumed.pid));
      await second.svc.stop(); // idempotent
    } finally {
      await second?.stop();
      await h.hv.undefine(n, { force: true }).catch(() => undefined);
      await h.stop();
    }
  });
});
