import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import type { HypervisorHealth } from '../../../src/hypervisor/port.js';
import { hypervisorCapacity } from '../../../src/tasks/task-service.js';
import { TaskVms, taskVmName } from '../../../src/tasks/task-vm.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';
import { FakeAgents, FakeVms } from './orchestrator-fakes.js';

// The code under test unref's its timers (they must never keep a server alive); here nothing
// else would hold the event loop open while they run.
let keepAlive: NodeJS.Timeout;
before(() => {
  keepAlive = setInterval(() => undefined, 1000);
});
after(() => clearInterval(keepAlive));

describe('TaskVms', () => {
  test('names: agent-task-<first 8 hex of the uuid>, a valid VM name', () => {
    assert.equal(taskVmName('task-1a2b3c4d-0000-4000-8000-000000000000'), 'agent-task-1a2b3c4d');
  });

  test('waitReady waits for an agent that is Ready with the VM uuid as instance id', async () => {
    const agents = new FakeAgents();
    const backend = new FakeVms(agents);
    const vms = new TaskVms(backend, agents);
    agents.set('agent-task-aaaa0000', 'Ready', 'uuid-of-an-older-vm');
    backend.createDelayMs = 20;
    const op = await vms.create('agent-task-aaaa0000');
    const { ip } = await vms.waitReady('agent-task-aaaa0000', op, { timeoutMs: 5000, signal: new AbortController().signal });
    assert.equal(ip, '10.0.0.7');
    assert.equal(agents.listeners, 0, 'no listener left behind');
  });

  test('an agent that never gets Ready is a timeout naming the VM and the status', async () => {
    const agents = new FakeAgents();
    const backend = new FakeVms(agents);
    const vms = new TaskVms(backend, agents);
    const op = await vms.create('agent-task-bbbb0000');
    // The fake makes the new VM's agent Ready once its operation completed: only then can the test override it.
    await waitFor('the fake to report the agent Ready', () => agents.get('agent-task-bbbb0000')?.status === 'Ready', {
      deadlineMs: DEADLINE_MS.local,
    });
    agents.set('agent-task-bbbb0000', 'Starting', 'uuid-agent-task-bbbb0000');
    await assert.rejects(
      vms.waitReady('agent-task-bbbb0000', op, { timeoutMs: 100, signal: new AbortController().signal }),
      (e: unknown) =>
        e instanceof SvcError &&
        e.code === 'server.timeout' &&
        /agent-task-bbbb0000 was not Ready within 0 s \(status Starting\)/.test(e.message),
    );
  });

  test('release: VM_NOT_FOUND is fine, VM_BUSY is retried, other errors surface', async () => {
    const agents = new FakeAgents();
    let calls = 0;
    const backend = new FakeVms(agents);
    const busyThenOk: FakeVms['api'] = {
      ...backend.api,
      remove: (name) =>
        ++calls < 3 ? Promise.reject(new SvcError('VM_BUSY', 'busy')) : Promise.resolve({ deleted: true, name, disk_deleted: true }),
    };
    assert.equal(await new TaskVms({ api: busyThenOk, operations: backend.operations }, agents).release('agent-task-c', null, 1000), true);
    assert.equal(calls, 3);
    assert.equal(await new TaskVms(backend, agents).release('agent-task-never', null, 1000), true);
    const broken: FakeVms['api'] = { ...backend.api, remove: () => Promise.reject(new SvcError('LIBVIRT_ERROR', 'nope')) };
    await assert.rejects(new TaskVms({ api: broken, operations: backend.operations }, agents).release('agent-task-d', null, 1000), /nope/);
  });

  test('watchAgent: lost after the grace, not when it comes back in time', (t) => {
    // The grace is a timer: mocked, so "in time" and "after the grace" do not depend on how busy the machine is.
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const agents = new FakeAgents();
    const vms = new TaskVms(new FakeVms(agents), agents);
    const lost: string[] = [];
    const stop = vms.watchAgent('agent-task-e', 80, (why) => lost.push(why));
    agents.set('agent-task-e', 'Disconnected', 'u');
    t.mock.timers.tick(79);
    agents.set('agent-task-e', 'Ready', 'u');
    t.mock.timers.tick(200);
    assert.deepEqual(lost, []);
    agents.set('agent-task-e', 'Disconnected', 'u');
    t.mock.timers.tick(79);
    assert.deepEqual(lost, []);
    t.mock.timers.tick(1);
    assert.deepEqual(lost, ['the agent of VM agent-task-e stayed disconnected for 0 s']);
    stop();
    assert.equal(agents.listeners, 0);
  });
});

describe('hypervisorCapacity', () => {
  const health = (status: HypervisorHealth['status']): HypervisorHealth => ({
    status,
    hypervisor: 'qemu:///system',
    circuit: status === 'down' ? 'open' : 'closed',
    retryAfterSeconds: 12,
    hosts: [
      {
        host: 'qemu:///system',
        status: status === 'down' ? 'down' : 'ok',
        circuit: status === 'down' ? 'open' : 'closed',
        latencyMs: null,
        accelerator: null,
        acceleratorReason: null,
        error: { code: 'HYPERVISOR_UNAVAILABLE', message: 'connection refused' },
      },
    ],
  });

  test('ok unless the hypervisor is down; one probe per second at most', async () => {
    let probes = 0;
    let status: HypervisorHealth['status'] = 'degraded';
    let t = 0;
    const check = hypervisorCapacity({ health: () => (probes++, Promise.resolve(health(status))) }, () => t);
    assert.deepEqual(await check(), { ok: true });
    status = 'down';
    assert.deepEqual(await check(), { ok: true }, 'cached');
    t = 1500;
    const down = await check();
    assert.equal(down.ok, false);
    assert.ok(
      !down.ok &&
        /hypervisor is down \(qemu:\/\/\/system: connection refused, circuit open\)/.test(down.reason) &&
        down.retryAfterSeconds === 12,
    );
    assert.equal(probes, 2);
  });

  test('a failing health check means no capacity', async () => {
    const check = hypervisorCapacity({ health: () => Promise.reject(new Error('boom')) });
    const r = await check();
    assert.ok(!r.ok && /health check failed \(boom\)/.test(r.reason));
  });
});
