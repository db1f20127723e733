/**
 * The per-VM operation queue (DESIGN.md: "each agent connection, VM operation queue … runs as an
 * actor"). One actor per VM, id `agent:<vm_name>/vm-ops`, spawned by the main thread on first
 * use. It admits or refuses new jobs (job-plans.ts), runs them strictly one after another in
 * submission order, drives each through the operation state machine (src/core/operation-state.ts), and
 * reports every change as a kFrameVmJob frame. Different VMs are different actors, so their jobs
 * run in parallel. Its actors live on the main thread in both modes (mainThreadActorTypes below).
 *
 * It never calls the hypervisor itself (see actors/protocol/vm-frames.ts for why): each step is a kFrameVmStep
 * request answered by the main thread with a kFrameVmStepDone frame (or call('stepDone')). A step that gets no answer within
 * its timeout plus STEP_GRACE_MS fails the job (server.timeout), so a lost answer cannot wedge
 * the queue. After a completed delete, or IDLE_STOP_MS without work, the actor stops itself;
 * the main thread spawns a new one when the VM is next used.
 */
import { SvcError, toWire, type WireError } from '../../src/core/errors.js';
import { Outbox } from '../runtime/outbox.js';
import type { Actor, ActorContext, ActorFactory } from '../runtime/actor.js';
import { admissionError, planOf, type JobContext, type JobPlan, type PlanStep } from './job-plans.js';
import { OperationCause, OperationProgress, isTerminal, type OperationSnapshot } from '../../src/core/operation-state.js';
import {
  VM_OPS_ACTOR_TYPE,
  VmFrameKind,
  decodeJson,
  encodeJson,
  publicTypeOf,
  type JobFrame,
  type JobKind,
  type QueueStatus,
  type StepAnswer,
  type StepRequest,
  type StepResult,
  type SubmitArgs,
  type VmOpsInit,
} from '../protocol/vm-frames.js';

/** Extra time the actor waits for a step's answer beyond the step's own timeout, ms. */
export const STEP_GRACE_MS = 30_000;
/** An idle queue actor stops itself after this long, ms (10 minutes). */
export const IDLE_STOP_MS = 10 * 60_000;

interface Job {
  readonly op: OperationProgress<JobKind>;
  readonly plan: JobPlan;
  readonly ctx: JobContext & StepResult;
  stepIndex: number;
}

interface PendingStep {
  readonly callId: number;
  readonly job: Job;
  readonly step: PlanStep;
  readonly timer: NodeJS.Timeout;
}

const RESULT_KEYS: readonly (keyof StepResult)[] = [
  'state',
  'managed',
  'already',
  'stopped',
  'agentSinceMs',
  'agentMode',
  'disks',
  'diskDeleted',
  'hostname',
];

class VmOpsActor implements Actor {
  readonly #ctx: ActorContext;
  readonly #vm: string;
  readonly #idleStopMs: number;
  readonly #stepGraceMs: number;
  readonly #outbox: Outbox;
  /** Oldest first; the head runs, the rest wait. */
  readonly #queue: Job[] = [];
  #pending: PendingStep | null = null;
  #nextCallId = 1;
  #idleTimer: NodeJS.Timeout | null = null;
  #stopping = false;

  constructor(ctx: ActorContext, init: VmOpsInit) {
    this.#ctx = ctx;
    this.#vm = init.vm;
    this.#idleStopMs = init.idleStopMs ?? IDLE_STOP_MS;
    this.#stepGraceMs = init.stepGraceMs ?? STEP_GRACE_MS;
    this.#outbox = new Outbox(ctx);
    this.#armIdle();
  }

  receive(kind: number, payload: Uint8Array): void {
    if (kind !== VmFrameKind.kFrameVmStepDone) {
      this.#ctx.logger.warn({ vm: this.#vm, kind }, 'vm-ops got a frame of a kind it does not take; ignored');
      return;
    }
    let answer: StepAnswer;
    try {
      answer = decodeJson<StepAnswer>(payload);
    } catch (err) {
      this.#ctx.logger.error({ vm: this.#vm, err: String(err) }, 'step answer is not JSON; ignored (its step times out)');
      return;
    }
    this.#stepDone(answer);
  }

  call(method: string, args: unknown): unknown {
    switch (method) {
      case 'submit':
        return this.#submit(args as SubmitArgs);
      case 'stepDone':
        this.#stepDone(args as StepAnswer);
        return undefined;
      case 'status':
        return { vm: this.#vm, jobs: this.#queue.map((j) => j.op.snapshot()) } satisfies QueueStatus;
      default:
        throw new SvcError('request.invalid', `vm-ops has no method ${method}`);
    }
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    this.#clearIdle();
    if (this.#pending !== null) clearTimeout(this.#pending.timer);
    this.#pending = null;
    for (const job of this.#queue.splice(0)) {
      if (
        job.op.fail(
          { code: 'server.not_ready', message: `operation ${job.op.id} was stopped: its queue actor is shutting down` },
          OperationCause.cancelled,
        )
      ) {
        this.#emitJob(job);
      }
    }
    await this.#outbox.idle();
  }

  #submit(args: SubmitArgs): OperationSnapshot<JobKind> {
    if (this.#stopping) throw new SvcError('server.not_ready', `the operation queue of VM '${this.#vm}' is stopping`);
    if (typeof args?.jobId !== 'string' || typeof args.params?.kind !== 'string')
      throw new SvcError('request.invalid', 'submit needs jobId and params');
    const refusal = admissionError(
      this.#vm,
      args.params,
      this.#queue.map((j) => j.op.snapshot()),
      args.observed,
    );
    if (refusal !== null) throw refusal;
    this.#clearIdle();
    const op = new OperationProgress<JobKind>({ id: args.jobId, type: args.params.kind, target: this.#vm, logger: this.#ctx.logger });
    const job: Job = { op, plan: planOf(args.params), ctx: { vm: this.#vm, params: args.params, budgets: args.budgets }, stepIndex: 0 };
    this.#queue.push(job);
    const accepted = op.snapshot();
    this.#emitJob(job);
    // Started after submit has answered, so the caller sees the job as created: pending, 0 %.
    if (this.#queue.length === 1) queueMicrotask(() => this.#advance());
    return accepted;
  }

  /** Runs the head job's next step, or finishes it when no step is left. */
  #advance(): void {
    const job = this.#queue[0];
    if (job === undefined || this.#pending !== null || this.#stopping) return;
    if (job.op.status === 'pending' && job.op.start()) this.#emitJob(job);
    const steps = job.plan.steps;
    while (job.stepIndex < steps.length) {
      const step = steps[job.stepIndex]!;
      if (step.when !== undefined && !step.when(job.ctx)) {
        job.stepIndex++;
        continue;
      }
      const timeoutMs = step.timeoutMs?.(job.ctx) ?? job.ctx.budgets.stepTimeoutMs;
      const callId = this.#nextCallId++;
      const req: StepRequest = { callId, jobId: job.op.id, vm: this.#vm, step: step.step, args: step.args?.(job.ctx) ?? {}, timeoutMs };
      const timer = setTimeout(() => this.#stepTimedOut(callId), timeoutMs + this.#stepGraceMs);
      timer.unref();
      this.#pending = { callId, job, step, timer };
      this.#outbox.emit(VmFrameKind.kFrameVmStep, this.#ctx.id, encodeJson(req), true);
      return;
    }
    let result: Record<string, unknown>;
    try {
      result = job.plan.result(job.ctx);
    } catch (err) {
      this.#finish(job, toWire(err));
      return;
    }
    if (job.op.complete(result)) this.#emitJob(job);
    this.#finish(job, null);
  }

  #stepDone(answer: StepAnswer): void {
    const pending = this.#pending;
    if (pending === null || answer?.callId !== pending.callId) {
      this.#ctx.logger.warn({ vm: this.#vm, callId: answer?.callId }, 'answer for a step that is no longer awaited; ignored');
      return;
    }
    clearTimeout(pending.timer);
    this.#pending = null;
    const { job, step } = pending;
    if (!answer.ok) {
      this.#finish(job, answer.error);
      return;
    }
    mergeResult(job.ctx, answer.value);
    job.stepIndex++;
    // The last step's 100 % is reported by completion itself.
    if (step.progress < 100 && job.op.progress(step.progress)) this.#emitJob(job);
    this.#advance();
  }

  #stepTimedOut(callId: number): void {
    const pending = this.#pending;
    if (pending === null || pending.callId !== callId) return;
    this.#pending = null;
    const waitedMs = (pending.step.timeoutMs?.(pending.job.ctx) ?? pending.job.ctx.budgets.stepTimeoutMs) + this.#stepGraceMs;
    this.#finish(pending.job, {
      code: 'server.timeout',
      message: `step ${pending.step.step} of ${pending.job.op.id} got no answer from the main thread within ${waitedMs} ms`,
    });
  }

  /** Ends the head job (failed when `error` is set) and moves on to the next one. */
  #finish(job: Job, error: WireError | null): void {
    if (error !== null && job.op.fail(error)) this.#emitJob(job);
    if (this.#queue[0] === job) this.#queue.shift();
    const deleted = job.op.type === 'delete' && job.op.status === 'completed';
    if (deleted && this.#queue.length === 0) {
      // The VM is gone: a later create of the same name gets a fresh actor.
      this.#stopping = true;
      this.#ctx.stopSelf();
      return;
    }
    if (this.#queue.length === 0) this.#armIdle();
    else queueMicrotask(() => this.#advance());
  }

  #emitJob(job: Job): void {
    const frame: JobFrame = { kind: job.op.type, snapshot: job.op.snapshot() };
    this.#outbox.emit(VmFrameKind.kFrameVmJob, this.#ctx.id, encodeJson(frame), true);
    if (isTerminal(frame.snapshot.status) && publicTypeOf(job.op.type) !== null) {
      this.#ctx.logger.info(
        { vm: this.#vm, operation: job.op.id, status: frame.snapshot.status, error: frame.snapshot.error?.message },
        'VM operation finished',
      );
    }
  }

  #armIdle(): void {
    this.#clearIdle();
    this.#idleTimer = setTimeout(() => {
      if (this.#queue.length > 0 || this.#stopping) return;
      this.#stopping = true;
      this.#ctx.stopSelf();
    }, this.#idleStopMs);
    this.#idleTimer.unref();
  }

  #clearIdle(): void {
    if (this.#idleTimer !== null) clearTimeout(this.#idleTimer);
    this.#idleTimer = null;
  }
}

/** Copies the known fields of a step's answer into the job context (unknown fields are ignored). */
function mergeResult(ctx: StepResult, value: StepResult | undefined): void {
  if (typeof value !== 'object' || value === null) return;
  const target = ctx as Record<string, unknown>;
  for (const k of RESULT_KEYS) if (value[k] !== undefined) target[k] = value[k];
}

const factory: ActorFactory = (ctx, init) => new VmOpsActor(ctx, init as VmOpsInit);

/** Loaded by every shard (ActorSystem actorModules). */
export const actorTypes: Record<string, ActorFactory> = { [VM_OPS_ACTOR_TYPE]: factory };

/**
 * The queues live on the main thread in workers mode too (ActorSystem "Placement"): every step
 * they order is main-thread work (the libvirt binding, agent processes, the operation store and
 * events), so in a worker a queue gained nothing and paid a crossing and a thread wake-up each
 * way per step, and one comlink round trip per operation: vm-ops ran at 0.68-0.89 of inline.
 */
export const mainThreadActorTypes: readonly string[] = [VM_OPS_ACTOR_TYPE];
