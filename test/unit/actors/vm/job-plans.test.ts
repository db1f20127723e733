/** Admission rules and step plans of the VM queue (actors/vm/job-plans.ts). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { admissionError, planOf, MAX_QUEUED_JOBS, type JobContext } from '../../../../actors/vm/job-plans.js';
import type { OperationSnapshot } from '../../../../src/core/operation-state.js';
import type { JobKind, JobParams, StepResult } from '../../../../actors/protocol/vm-frames.js';

const create: JobParams = {
  kind: 'create',
  create: { uuid: 'u', vcpus: 1, memoryMiB: 256, diskGiB: 1, profile: 'basic', agentshare: true, start: true, sshKeys: [] },
};
const P: Record<JobKind, JobParams> = {
  create,
  delete: { kind: 'delete', force: false, deleteDisk: false },
  restart: { kind: 'restart', mode: 'graceful', gracefulTimeoutMs: 60_000 },
  deploy_agent: { kind: 'deploy_agent' },
  start: { kind: 'start' },
  stop: { kind: 'stop' },
  destroy: { kind: 'destroy' },
};

function job(kind: JobKind, status: 'pending' | 'running' = 'running'): OperationSnapshot<JobKind> {
  return {
    id: `op-${kind}`,
    type: kind,
    target: 'agent-a',
    status,
    createdAtMs: 0,
    completedAtMs: null,
    progressPercent: 40,
    result: null,
    error: null,
    seq: 2,
  };
}

const running = { exists: true, state: 'running' as const };
const stopped = { exists: true, state: 'stopped' as const };
const missing = { exists: false, state: null };

function codeOf(
  kind: JobKind,
  queue: OperationSnapshot<JobKind>[],
  observed: { exists: boolean; state: 'running' | 'stopped' | null },
  params = P[kind],
): string | null {
  return admissionError('agent-a', params, queue, observed)?.code ?? null;
}

/** Walks a plan the way the actor does, answering each step with `answers[step]`. */
function walk(
  params: JobParams,
  answers: Partial<Record<string, StepResult>> = {},
): { steps: string[]; progress: number[]; ctx: JobContext & StepResult } {
  const plan = planOf(params);
  const ctx: JobContext & StepResult = { vm: 'agent-a', params, budgets: { stepTimeoutMs: 1000, agentConnectTimeoutMs: 5000 } };
  const steps: string[] = [];
  const progress: number[] = [];
  for (const s of plan.steps) {
    if (s.when !== undefined && !s.when(ctx)) continue;
    steps.push(s.args === undefined ? s.step : `${s.step}${JSON.stringify(s.args(ctx))}`);
    Object.assign(ctx, answers[s.step] ?? {});
    progress.push(s.progress);
  }
  return { steps, progress, ctx };
}

describe('admission', () => {
  test('an idle queue checks the observed state', () => {
    assert.equal(codeOf('create', [], missing), null);
    assert.equal(codeOf('create', [], stopped), 'VM_ALREADY_EXISTS');
    for (const k of ['delete', 'restart', 'deploy_agent', 'start', 'stop', 'destroy'] as const)
      assert.equal(codeOf(k, [], missing), 'VM_NOT_FOUND', k);
    assert.equal(codeOf('restart', [], stopped), 'VM_NOT_RUNNING');
    assert.equal(codeOf('deploy_agent', [], stopped), 'VM_NOT_RUNNING');
    assert.equal(codeOf('restart', [], running), null);
    assert.equal(codeOf('delete', [], running), 'VM_RUNNING');
    assert.equal(codeOf('delete', [], running, { kind: 'delete', force: true, deleteDisk: false }), null);
    assert.equal(codeOf('delete', [], { exists: true, state: 'crashed' } as never), null);
    for (const k of ['start', 'stop', 'destroy'] as const)
      for (const o of [running, stopped]) assert.equal(codeOf(k, [], o), null, `${k} is idempotent`);
  });

  test('a queued or running create or delete blocks everything, naming the operation', () => {
    for (const k of ['delete', 'restart', 'deploy_agent', 'start', 'stop', 'destroy'] as const) {
      const err = admissionError('agent-a', P[k], [job('create')], running);
      assert.equal(err?.code, 'VM_BUSY', k);
      assert.match(err.message, /being created by vm_create op-create \(running, 40%\)/);
      assert.equal(err.details?.['operation_id'], 'op-create');
    }
    assert.equal(codeOf('create', [job('create', 'pending')], missing), 'VM_ALREADY_EXISTS');
    for (const k of ['create', 'delete', 'restart', 'start'] as const) {
      const err = admissionError('agent-a', P[k], [job('delete')], running);
      assert.equal(err?.code, 'VM_BUSY', k);
      assert.match(err.message, /being deleted by vm_delete op-delete/);
    }
  });

  test('delete needs an idle VM; other changes queue up to the limit', () => {
    assert.equal(codeOf('delete', [job('restart')], stopped), 'VM_BUSY');
    assert.equal(codeOf('create', [job('stop')], stopped), 'VM_ALREADY_EXISTS');
    // Queued jobs skip the state check: they are checked again when their turn comes.
    assert.equal(codeOf('restart', [job('stop')], stopped), null);
    const full = Array.from({ length: MAX_QUEUED_JOBS }, () => job('start'));
    assert.equal(codeOf('stop', full.slice(1), running), null);
    const err = admissionError('agent-a', P.stop, full, running);
    assert.equal(err?.code, 'VM_BUSY');
    assert.match(err.message, /limit/);
  });
});

describe('plans', () => {
  test('create: define, start, agent up, wait; progress 10/40/70/100; result vm name and state', () => {
    const r = walk(create, {
      define: { state: 'stopped', managed: true },
      start: { state: 'running' },
      agentUp: { agentMode: 'local', agentSinceMs: 123 },
    });
    assert.deepEqual(
      r.steps.map((s) => s.replace(/\{.*/, '')),
      ['define', 'start', 'agentUp', 'agentWait'],
    );
    assert.ok(r.steps[3]?.includes('"sinceMs":123'));
    assert.deepEqual(r.progress, [10, 40, 70, 100]);
    assert.deepEqual(planOf(create).result(r.ctx), { vm: { name: 'agent-a', state: 'running' } });
    const agentWait = planOf(create).steps.find((s) => s.step === 'agentWait');
    assert.equal(agentWait?.timeoutMs?.(r.ctx), 5000, 'the agent wait uses the connect budget');
  });

  test('create with start=false only defines; an unmanaged VM gets no agent steps', () => {
    const noStart: JobParams = { kind: 'create', create: { ...(create as { create: object }).create, start: false } as never };
    assert.deepEqual(
      walk(noStart, { define: { state: 'stopped', managed: true } }).steps.map((s) => s.replace(/\{.*/, '')),
      ['define'],
    );
    assert.deepEqual(walk(P.start, { start: { state: 'running', managed: false } }).steps, ['start']);
  });

  test('restart: graceful shuts down and forces only when the guest did not stop; hard destroys', () => {
    const graceful = walk(P.restart, {
      check: { state: 'running', managed: true },
      waitStopped: { stopped: true },
      agentUp: { agentMode: 'local', agentSinceMs: 1 },
    });
    assert.deepEqual(
      graceful.steps.map((s) => s.replace(/\{.*/, '')),
      ['check', 'agentDown', 'shutdown', 'waitStopped', 'start', 'agentUp', 'agentWait'],
    );
    assert.ok(graceful.steps.includes('waitStopped{"timeoutMs":60000}'));
    const forced = walk(P.restart, { check: { state: 'running', managed: true }, waitStopped: { stopped: false } });
    assert.ok(forced.steps.includes('destroy'));
    assert.equal((planOf(P.restart).result(forced.ctx) as { forced: boolean }).forced, true);
    const hard = walk({ kind: 'restart', mode: 'hard', gracefulTimeoutMs: 60_000 }, { check: { state: 'running', managed: false } });
    assert.deepEqual(hard.steps, ['check{"require":"running"}', 'destroy', 'start']);
  });

  test('delete: undefine, stop the agent, purge files (disk only with delete_disk); result {deleted, name, disk_deleted}', () => {
    const r = walk({ kind: 'delete', force: true, deleteDisk: true }, { undefine: { disks: ['/d'] }, purgeFiles: { diskDeleted: true } });
    assert.deepEqual(r.steps, ['undefine{"force":true}', 'agentDown', 'purgeFiles{"deleteDisk":true,"disks":["/d"]}']);
    assert.deepEqual(planOf({ kind: 'delete', force: true, deleteDisk: true }).result(r.ctx), {
      deleted: true,
      name: 'agent-a',
      disk_deleted: true,
    });
  });

  test('deploy-agent restarts the agent; stop and destroy stop it', () => {
    assert.deepEqual(walk(P.deploy_agent, { check: { state: 'running', managed: true }, agentUp: { agentMode: 'local' } }).steps, [
      'check{"require":"running"}',
      'agentUp{"restart":true}',
      'agentWait{"sinceMs":0}',
    ]);
    assert.deepEqual(walk(P.stop).steps, ['shutdown', 'agentDown']);
    assert.deepEqual(walk(P.destroy).steps, ['destroy', 'agentDown']);
    for (const k of Object.keys(P) as JobKind[]) {
      const steps = planOf(P[k]).steps;
      assert.equal(steps.at(-1)?.progress, 100, `${k} ends at 100`);
      assert.ok(
        steps.every((s, i) => i === 0 || s.progress > steps[i - 1]!.progress),
        `${k} progress grows`,
      );
    }
  });
});
