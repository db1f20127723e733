/** The vm-ops actor driven directly with a recording context (no shards, no hypervisor). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Actor, ActorContext } from '../../../../actors/runtime/actor.js';
import type { OperationSnapshot } from '../../../../src/core/operation-state.js';
import { actorTypes } from '../../../../actors/vm/vm-ops.actor.js';
import {
  VM_OPS_ACTOR_TYPE,
  VmFrameKind,
  decodeJson,
  encodeJson,
  vmOfOpsActor,
  vmOpsActorId,
  type JobFrame,
  type JobKind,
  type JobParams,
  type StepRequest,
  type StepResult,
  type SubmitArgs,
} from '../../../../actors/protocol/vm-frames.js';
import { SvcError } from '../../../../src/core/errors.js';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

interface Rig {
  actor: Actor;
  steps: StepRequest[];
  jobs: JobFrame[];
  stopped: () => boolean;
  submit(jobId: string, params: JobParams, observed?: SubmitArgs['observed']): OperationSnapshot<JobKind>;
  /** Answers every new step request with `answer(step)` until none comes (microtask turns). */
  pump(answer: (req: StepRequest) => StepResult | SvcError): Promise<string[]>;
  last(jobId: string): OperationSnapshot<JobKind> | undefined;
}

function rig(init: Record<string, unknown> = {}): Rig {
  const steps: StepRequest[] = [];
  const jobs: JobFrame[] = [];
  let stopped = false;
  const ctx: ActorContext = {
    id: vmOpsActorId('agent-a'),
    type: VM_OPS_ACTOR_TYPE,
    shardIndex: 0,
    logger: quiet,
    emit: (kind, _key, payload) => {
      if (kind === VmFrameKind.kFrameVmStep) steps.push(decodeJson<StepRequest>(payload));
      else if (kind === VmFrameKind.kFrameVmJob) jobs.push(decodeJson<JobFrame>(payload));
      return true;
    },
    whenWritable: () => Promise.resolve(),
    spawn: () => undefined,
    stopSelf: () => {
      stopped = true;
    },
  };
  const actor = actorTypes[VM_OPS_ACTOR_TYPE]!(ctx, { vm: 'agent-a', ...init });
  let answered = 0;
  return {
    actor,
    steps,
    jobs,
    stopped: () => stopped,
    submit: (jobId, params, observed = { exists: true, state: 'running' }) =>
      actor.call!('submit', {
        jobId,
        params,
        observed,
        budgets: { stepTimeoutMs: 1000, agentConnectTimeoutMs: 2000 },
      } satisfies SubmitArgs) as OperationSnapshot<JobKind>,
    async pump(answer) {
      const seen: string[] = [];
      for (let idle = 0; idle < 3;) {
        await new Promise((r) => setImmediate(r));
        if (answered === steps.length) {
          idle++;
          continue;
        }
        idle = 0;
        const req = steps[answered++]!;
        seen.push(`${req.jobId}:${req.step}`);
        const a = answer(req);
        // As the main thread answers: a kFrameVmStepDone frame on the shard's inbound ring.
        actor.receive!(
          VmFrameKind.kFrameVmStepDone,
          encodeJson(
            a instanceof SvcError ? { callId: req.callId, ok: false, error: a.toWire() } : { callId: req.callId, ok: true, value: a },
          ),
        );
      }
      return seen;
    },
    last: (jobId) => jobs.filter((j) => j.snapshot.id === jobId).at(-1)?.snapshot,
  };
}

const managedAnswers = (req: StepRequest): StepResult =>
  req.step === 'agentUp' ? { agentMode: 'local', agentSinceMs: 1, managed: true, state: 'running' } : { state: 'running', managed: true };

describe('vm-ops actor', () => {
  test("ids: agent:<vm>/vm-ops shares the agent actor's placement key", () => {
    assert.equal(vmOpsActorId('agent-a'), 'agent:agent-a/vm-ops');
    assert.equal(vmOfOpsActor('agent:agent-a/vm-ops'), 'agent-a');
    assert.equal(vmOfOpsActor('agent:agent-a'), null);
  });

  test('a job is accepted pending, then runs its steps in order, reporting each change', async () => {
    const r = rig();
    const accepted = r.submit('op-1', { kind: 'deploy_agent' });
    assert.deepEqual([accepted.status, accepted.progressPercent], ['pending', 0]);
    const seen = await r.pump(managedAnswers);
    assert.deepEqual(seen, ['op-1:check', 'op-1:agentUp', 'op-1:agentWait']);
    assert.deepEqual(
      r.jobs.map((j) => `${j.snapshot.status}:${j.snapshot.progressPercent}`),
      ['pending:0', 'running:0', 'running:10', 'running:70', 'completed:100'],
    );
    assert.ok(r.jobs.every((j, i) => i === 0 || j.snapshot.seq > r.jobs[i - 1]!.snapshot.seq));
    assert.deepEqual(r.last('op-1')?.result, { vm: { name: 'agent-a', state: 'running' } });
  });

  test('jobs on one VM run one after another in submission order', async () => {
    const r = rig();
    r.submit('job-stop', { kind: 'stop' });
    r.submit('op-restart', { kind: 'restart', mode: 'hard', gracefulTimeoutMs: 0 });
    r.submit('job-start', { kind: 'start' });
    const seen = await r.pump((req) =>
      req.step === 'check' ? { state: 'running', managed: false } : { state: 'running', managed: false },
    );
    assert.deepEqual(seen, [
      'job-stop:shutdown',
      'job-stop:agentDown',
      'op-restart:check',
      'op-restart:destroy',
      'op-restart:start',
      'job-start:start',
    ]);
    for (const id of ['job-stop', 'op-restart', 'job-start']) assert.equal(r.last(id)?.status, 'completed', id);
  });

  test('a failed step fails the job with its error; the next job still runs', async () => {
    const r = rig();
    r.submit('op-r', { kind: 'restart', mode: 'graceful', gracefulTimeoutMs: 10 });
    r.submit('job-d', { kind: 'destroy' });
    await r.pump((req) => (req.step === 'check' ? new SvcError('VM_NOT_RUNNING', "VM 'agent-a' is stopped") : {}));
    const failed = r.last('op-r');
    assert.equal(failed?.status, 'failed');
    assert.deepEqual(failed?.error, { code: 'VM_NOT_RUNNING', message: "VM 'agent-a' is stopped" });
    assert.equal(r.last('job-d')?.status, 'completed');
  });

  test('refusals come back as SvcErrors (VM_BUSY names the running operation)', () => {
    const r = rig();
    r.submit(
      'op-c',
      {
        kind: 'create',
        create: { uuid: 'u', vcpus: 1, memoryMiB: 256, diskGiB: 1, profile: 'basic', agentshare: false, start: true, sshKeys: [] },
      },
      { exists: false, state: null },
    );
    assert.throws(
      () => r.submit('op-d', { kind: 'delete', force: true, deleteDisk: false }),
      (e: SvcError) => e.code === 'VM_BUSY' && e.message.includes('op-c'),
    );
    assert.throws(
      () => r.actor.call!('submit', { jobId: 1 }),
      (e: SvcError) => e.code === 'request.invalid',
    );
    assert.throws(
      () => r.actor.call!('nope', {}),
      (e: SvcError) => e.code === 'request.invalid',
    );
  });

  test('a step with no answer fails the job after its timeout plus the grace', async () => {
    const r = rig({ stepGraceMs: 20 });
    r.submit('job-s', { kind: 'start' });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(r.steps.length, 1);
    // Waits out the step timeout (1000 ms + 20 ms grace): timers fire in expiry order, so the actor's timer armed before this pause has run when it ends, however busy the machine.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const s = r.last('job-s');
    assert.equal(s?.status, 'failed');
    assert.equal(s?.error?.code, 'server.timeout');
    assert.match(s?.error?.message ?? '', /no answer from the main thread within 1020 ms/);
    // A late answer is ignored, as a frame or as a call.
    r.actor.receive!(VmFrameKind.kFrameVmStepDone, encodeJson({ callId: r.steps[0]!.callId, ok: true, value: {} }));
    r.actor.call!('stepDone', { callId: r.steps[0]!.callId, ok: true, value: {} });
    assert.equal(r.last('job-s')?.status, 'failed');
  });

  test('a completed delete stops the actor; so does idleness; stop() fails what is queued', async () => {
    const del = rig();
    del.submit('op-del', { kind: 'delete', force: true, deleteDisk: true }, { exists: true, state: 'running' });
    await del.pump(() => ({ disks: [], diskDeleted: true }));
    assert.equal(del.last('op-del')?.status, 'completed');
    assert.deepEqual(del.last('op-del')?.result, { deleted: true, name: 'agent-a', disk_deleted: true });
    assert.equal(del.stopped(), true);

    const idle = rig({ idleStopMs: 30 });
    // Waits out idleStopMs (30 ms): timers fire in expiry order, so the idle timer armed before this pause has run when it ends, however busy the machine.
    await new Promise((resolve) => setTimeout(resolve, 80));
    assert.equal(idle.stopped(), true);

    const busy = rig();
    busy.submit('job-1', { kind: 'stop' });
    busy.submit('job-2', { kind: 'start' });
    await busy.actor.stop!();
    assert.deepEqual(
      ['job-1', 'job-2'].map((id) => busy.last(id)?.status),
      ['failed', 'failed'],
    );
    assert.equal(busy.last('job-2')?.error?.code, 'server.not_ready');
    assert.throws(
      () => busy.submit('job-3', { kind: 'stop' }),
      (e: SvcError) => e.code === 'server.not_ready',
    );
  });

  test('status lists the queue', async () => {
    const r = rig();
    r.submit('job-1', { kind: 'stop' });
    r.submit('job-2', { kind: 'start' });
    const st = r.actor.call!('status', undefined) as { vm: string; jobs: OperationSnapshot<JobKind>[] };
    assert.equal(st.vm, 'agent-a');
    assert.deepEqual(
      st.jobs.map((j) => [j.id, j.type]),
      [
        ['job-1', 'stop'],
        ['job-2', 'start'],
      ],
    );
    await r.pump(() => ({}));
  });
});
