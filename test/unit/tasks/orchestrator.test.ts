import assert from 'node:assert/strict';
import { access, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { SvcError } from '../../../src/core/errors.js';
import { EventStore } from '../../../src/events/event-store.js';
import { Storage } from '../../../src/storage/storage.js';
import { TaskOrchestrator, type CapacityCheck, type OrchestratorOptions } from '../../../src/tasks/orchestrator.js';
import { readRecords } from '../../../src/tasks/task-log-stream.js';
import type { TaskRecord } from '../../../src/tasks/task-state.js';
import { TaskVms } from '../../../src/tasks/task-vm.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';
import { FakeAgents, FakeCommands, FakeVms, makeRepo } from './orchestrator-fakes.js';

let root: string;
let repo: string;
let n = 0;
// The orchestrator's timers are unref'd (they must never keep a server alive); in a test nothing
// else holds the event loop open while a kill grace runs.
let keepAlive: NodeJS.Timeout;
before(async () => {
  keepAlive = setInterval(() => undefined, 1000);
  root = await mkdtemp(join(tmpdir(), 'orchestrator-'));
  repo = await makeRepo(join(root, 'repo'));
});
after(async () => {
  clearInterval(keepAlive);
  await rm(root, { recursive: true, force: true });
});

interface Rig {
  o: TaskOrchestrator;
  vms: FakeVms;
  agents: FakeAgents;
  commands: FakeCommands;
  events: EventStore;
  stateDir: string;
}

function rig(opts: Partial<OrchestratorOptions> & { capacity?: () => Promise<CapacityCheck> } = {}): Rig {
  const stateDir = join(root, `state-${++n}`);
  const agents = new FakeAgents();
  const vms = new FakeVms(agents);
  const commands = new FakeCommands();
  const events = new EventStore();
  const o = new TaskOrchestrator({
    logger: pino({ level: 'silent' }),
    events,
    vms: new TaskVms(vms, agents),
    commands,
    storage: new Storage({ rootDir: join(stateDir, 'storage') }),
    stateDir,
    capacity: () => Promise.resolve({ ok: true }),
    killGraceMs: 100,
    ...opts,
  });
  return { o, vms, agents, commands, events, stateDir };
}

const manifest = (command: string[], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  manifest: { name: 'unit', repository: { url: repo }, agent: { prompt: 'do it', model: 'm-1', command }, ...extra },
});

function waitState(o: TaskOrchestrator, id: string, states: readonly string[]): Promise<TaskRecord> {
  return waitFor(
    `task ${id} to be ${states.join(' or ')}`,
    () => {
      const t = o.get(id);
      return states.includes(t.state) ? t : undefined;
    },
    { deadlineMs: DEADLINE_MS.process, intervalMs: 10, lastState: () => `${o.get(id).state}: ${o.get(id).state_message}` },
  );
}
const TERMINAL = ['completed', 'failed', 'failed_preserved', 'cancelled'];
const exists = (p: string): Promise<boolean> =>
  access(p).then(
    () => true,
    () => false,
  );

describe('TaskOrchestrator', () => {
  test('the happy path: every state in order, the command as the manifest says, progress, artifacts, the VM deleted', async () => {
    const r = rig();
    const id = await r.o.submit(manifest(['ok', '--prompt={prompt}', '{model}'], { lifecycle: { timeout: '10m' } }));
    const t = await waitState(r.o, id, TERMINAL);
    assert.equal(t.state, 'completed', t.state_message);
    assert.equal(t.exit_code, 0);
    assert.equal(t.vm_name, `agent-task-${id.slice(5, 13)}`);
    assert.equal(t.vm_ip, '10.0.0.7');
    assert.equal(t.progress.tool_calls, 2);
    assert.equal(t.progress.current_tool, null, 'the final result closes every open tool call');
    const moves = r.events.query({ eventType: 'task.state_changed', limit: 100 }).events.map((e) => e.details['to']);
    assert.deepEqual(moves, ['pending', 'staging', 'provisioning', 'ready', 'running', 'completing', 'completed']);
    const started = r.commands.started[0];
    assert.equal(started?.agentId, t.vm_name);
    assert.equal(started?.args.commandId, id);
    assert.deepEqual([started?.args.command, ...(started?.args.args ?? [])], ['ok', '--prompt=do it', 'm-1']);
    assert.equal(started?.args.workingDir, join(r.stateDir, 'tasks', id, 'workspace'));
    assert.deepEqual(started?.args.env, {
      SANDBOX_TASK_ID: id,
      SANDBOX_WORKSPACE: join(r.stateDir, 'tasks', id, 'workspace'),
      SANDBOX_OUTBOX: join(r.stateDir, 'storage', 'outbox', id),
    });
    assert.ok((started?.args.timeoutSeconds ?? 0) > 600 && (started?.args.timeoutSeconds ?? 0) <= 630);
    assert.deepEqual(
      r.vms.created.map((c) => [c.profile, c.vcpus, c.memoryMiB, c.diskGiB]),
      [['basic', 1, 1024, 10]],
    );
    await until(
      'the task VM to be deleted',
      () => r.vms.removed.length === 1,
      () => `removed ${JSON.stringify(r.vms.removed)}`,
    );
    await until('the workspace to be removed', async () => !(await exists(join(r.stateDir, 'tasks', id, 'workspace'))));
    const recs = [];
    for await (const rec of readRecords(r.o.taskLog(id).path, 1 << 30)) recs.push(rec);
    assert.deepEqual(recs.at(-1), { seq: recs.length, event: 'completed', data: '0' });
    assert.equal(r.o.activeCount(), 0);
  });

  test('a failing command: failed with its exit code and last stderr line; preserve keeps VM and workspace', async () => {
    const r = rig();
    const id = await r.o.submit(manifest(['fail']));
    const t = await waitState(r.o, id, TERMINAL);
    assert.equal(t.state, 'failed');
    assert.equal(t.exit_code, 5);
    assert.equal(t.error, 'the coding agent exited with code 5: something broke');
    const kept = await r.o.submit(manifest(['fail'], { lifecycle: { failure_action: 'preserve' } }));
    const k = await waitState(r.o, kept, TERMINAL);
    assert.equal(k.state, 'failed_preserved');
    await until(
      'the task VM to be deleted',
      () => r.vms.removed.length === 1,
      () => `removed ${JSON.stringify(r.vms.removed)}`,
    );
    assert.deepEqual(r.vms.removed, [t.vm_name]);
    assert.equal(r.vms.existing.has(k.vm_name ?? ''), true);
    assert.equal(await exists(join(r.stateDir, 'tasks', kept, 'workspace', 'hello.txt')), true);
  });

  test('cancel during running: SIGTERM, then SIGKILL after the grace; DELETE resolves after the result', async () => {
    const r = rig();
    const id = await r.o.submit(manifest(['stubborn']));
    await waitState(r.o, id, ['running']);
    await until('the command to start', () => r.commands.started.length === 1);
    const t = await r.o.cancel(id, 'stop it');
    assert.equal(t.state, 'cancelled');
    assert.equal(t.state_message, 'cancelled: stop it');
    assert.deepEqual(r.commands.signals, [15, 9]);
    await until(
      'the task VM to be deleted',
      () => r.vms.removed.length === 1,
      () => `removed ${JSON.stringify(r.vms.removed)}`,
    );
    await assert.rejects(r.o.cancel(id, 'again'), (e: unknown) => e instanceof SvcError && e.code === 'task.not_cancellable');
    await assert.rejects(
      r.o.cancel('task-00000000-0000-4000-8000-000000000000', ''),
      (e: unknown) => e instanceof SvcError && e.code === 'task.not_found',
    );
  });

  test('cancel during provisioning: the VM is deleted once its create operation has finished', async () => {
    const r = rig();
    r.vms.createDelayMs = 300;
    const id = await r.o.submit(manifest(['ok']));
    await waitState(r.o, id, ['provisioning']);
    await r.o.cancel(id, '');
    assert.equal(r.o.get(id).state_message, 'cancelled by request');
    await until(
      'the task VM to be deleted',
      () => r.vms.removed.length === 1,
      () => `removed ${JSON.stringify(r.vms.removed)}`,
    );
    assert.equal(r.commands.started.length, 0, 'the command never started');
  });

  test('lifecycle.timeout counts from submission: a task waiting for a slot fails in pending, naming the timer', async () => {
    const r = rig({ maxConcurrent: 1 });
    const first = await r.o.submit(manifest(['hang']));
    await waitState(r.o, first, ['running']);
    const second = await r.o.submit(manifest(['ok'], { lifecycle: { timeout: '1s' } }));
    const t = await waitState(r.o, second, TERMINAL);
    assert.equal(t.state, 'failed');
    assert.equal(t.error, 'lifecycle.timeout (1s) expired in state pending');
    await r.o.cancel(first, 'done');
    assert.deepEqual(r.commands.signals, [15]);
  });

  test('a timeout while running kills the command; an agent lost fails the task; a refused start fails it', async () => {
    const r = rig({ agentLostGraceMs: 50 });
    const timed = await r.o.submit(manifest(['hang'], { lifecycle: { timeout: '1s' } }));
    const t = await waitState(r.o, timed, TERMINAL);
    assert.match(t.error ?? '', /^lifecycle\.timeout \(1s\) expired in state (running|ready|provisioning|staging)/);
    const lost = await r.o.submit(manifest(['hang']));
    const running = await waitState(r.o, lost, ['running']);
    r.agents.set(running.vm_name ?? '', 'Disconnected', `uuid-${running.vm_name ?? ''}`);
    const l = await waitState(r.o, lost, TERMINAL);
    assert.equal(l.state, 'failed');
    assert.equal(l.error, `agent lost: the agent of VM ${running.vm_name ?? ''} stayed disconnected for 0 s`);
    const refused = await r.o.submit(manifest(['refuse']));
    const f = await waitState(r.o, refused, TERMINAL);
    assert.match(f.error ?? '', /^running failed: agent agent-task-\w+ is not connected/);
  });

  test('a failed create operation fails the task in provisioning (a taken name deletes nothing); a bad repository in staging', async () => {
    const r = rig();
    r.vms.failCreate = 'no room on the host';
    const id = await r.o.submit(manifest(['ok']));
    const t = await waitState(r.o, id, TERMINAL);
    assert.match(t.error ?? '', /^provisioning failed: creating VM agent-task-\w+ failed: no room on the host$/);
    r.vms.failCreate = null;
    r.vms.nameTaken = true;
    const taken = await r.o.submit(manifest(['ok']));
    const k = await waitState(r.o, taken, TERMINAL);
    assert.match(k.error ?? '', /^provisioning failed: VM 'agent-task-\w+' already exists$/);
    assert.equal(k.vm_name, null);
    // A negative check: the clean-up runs after the terminal state; a pause in which no delete may come.
    await new Promise((res) => setTimeout(res, 50));
    assert.deepEqual(r.vms.removed, [], "a VM that is not the task's is never deleted");
    const bad = await r.o.submit({ manifest: { name: 'x', repository: { url: join(root, 'nothing-here') }, prompt: 'p' } });
    const b = await waitState(r.o, bad, TERMINAL);
    assert.match(b.error ?? '', /^staging failed: git clone failed/);
  });

  test('no capacity and a full pending queue are 503 task.no_capacity; stop() fails what runs and refuses new tasks', async () => {
    const down = rig({ capacity: () => Promise.resolve({ ok: false, reason: 'the hypervisor is down', retryAfterSeconds: 7 }) });
    await assert.rejects(
      down.o.submit(manifest(['ok'])),
      (e: unknown) => e instanceof SvcError && e.code === 'task.no_capacity' && e.details?.['retryAfterSeconds'] === 7,
    );
    await assert.rejects(
      down.o.submit({ manifest: { name: 'x' } }),
      (e: unknown) => e instanceof SvcError && e.code === 'task.invalid_manifest',
    );

    const r = rig({ maxConcurrent: 1, maxPending: 1 });
    const running = await r.o.submit(manifest(['hang']));
    await waitState(r.o, running, ['running']);
    const pending = await r.o.submit(manifest(['ok']));
    await assert.rejects(r.o.submit(manifest(['ok'])), (e: unknown) => e instanceof SvcError && e.code === 'task.no_capacity');
    await r.o.stop(5000);
    for (const id of [running, pending]) {
      const t = r.o.get(id);
      assert.equal(t.state, 'failed');
      assert.equal(t.error, 'sandboxd is stopping; the task was abandoned');
    }
    assert.deepEqual(r.commands.signals, [15]);
    assert.equal(r.vms.removed.length, 1);
    await assert.rejects(r.o.submit(manifest(['ok'])), (e: unknown) => e instanceof SvcError && e.code === 'task.no_capacity');
  });

  test('finished tasks beyond the retention are forgotten with their files', async () => {
    const r = rig({ retention: 2 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(await r.o.submit(manifest(['ok'])));
      await waitState(r.o, ids[i] ?? '', TERMINAL);
    }
    await until(
      'the three task VMs to be deleted',
      () => r.vms.removed.length === 3,
      () => `removed ${JSON.stringify(r.vms.removed)}`,
    );
    assert.throws(
      () => r.o.get(ids[0] ?? ''),
      (e: unknown) => e instanceof SvcError && e.code === 'task.not_found',
    );
    await until(
      'the oldest task to be evicted from the list',
      () => !r.o.list({ limit: 10, offset: 0 }).tasks.some((t) => t.id === ids[0]),
    );
    await until("the oldest task's files to be removed", async () => !(await exists(join(r.stateDir, 'tasks', ids[0] ?? ''))));
    assert.equal(await exists(join(r.stateDir, 'tasks', ids[2] ?? '', 'log.ndjson')), true);
  });
});

/** Waits until `cond` holds (the shared helper, polling every 10 ms). */
async function until(what: string, cond: () => boolean | Promise<boolean>, lastState?: () => string): Promise<void> {
  await waitFor(what, cond, { deadlineMs: DEADLINE_MS.process, intervalMs: 10, ...(lastState !== undefined && { lastState }) });
}
