/**
 * The main thread's side of the VM queue actors (protocol: actors/protocol/vm-frames.ts): spawns a
 * VM's actor on first use, submits jobs to it, runs the steps it asks for (StepExecutor) and
 * answers them (a kFrameVmStepDone frame each), and turns its job frames into OperationStore records, waiter resolutions and
 * `onJob` notifications (events, metrics).
 *
 * An actor that is gone (it stopped itself after a delete or when idle) is spawned again and the
 * call retried once. An actor lost with its shard (handleShardRestart) takes its jobs with it:
 * they are failed here with actor.shard_restarted, so no operation stays running forever.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ActorSystem } from '../../actors/runtime/actor-system.js';
import { isTerminal, type OperationSnapshot } from '../core/operation-state.js';
import {
  VM_OPS_ACTOR_TYPE,
  VmFrameKind,
  decodeJson,
  encodeJson,
  publicTypeOf,
  vmOfOpsActor,
  vmOpsActorId,
  type JobFrame,
  type JobKind,
  type JobParams,
  type ObservedState,
  type StepAnswer,
  type StepBudgets,
  type StepRequest,
  type SubmitArgs,
  type VmOpsInit,
} from '../../actors/protocol/vm-frames.js';
import { SvcError, toWire } from '../core/errors.js';
import type { OperationStore } from '../operations/operation-store.js';
import { newOperationId } from '../operations/operation-tracker.js';
import type { StepExecutor } from './step-executor.js';
import { errorMessage } from '../util/error-message.js';

export type JobSnapshot = OperationSnapshot<JobKind>;

/** A step is aborted this long after its own timeout, ms (the actor waits longer still: STEP_GRACE_MS). */
export const STEP_ABORT_GRACE_MS = 5000;

export interface VmOpsBridgeOptions {
  actors: ActorSystem;
  executor: StepExecutor;
  store: OperationStore;
  budgets: StepBudgets;
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** Every new snapshot of a job (after the store took it), with the status it had before. */
  onJob?: (snapshot: JobSnapshot, previous: JobSnapshot | null) => void;
  /** Spawn argument extras (tests shorten the idle stop). */
  actorInit?: Omit<VmOpsInit, 'vm'>;
}

interface Tracked {
  readonly vm: string;
  last: JobSnapshot | null;
  readonly createdAtMs: number;
  readonly kind: JobKind;
  readonly waiters: ((s: JobSnapshot) => void)[];
}

export class VmOpsBridge {
  readonly #o: VmOpsBridgeOptions;
  readonly #jobs = new Map<string, Tracked>();
  readonly #steps = new AbortController();
  #stopped = false;

  constructor(opts: VmOpsBridgeOptions) {
    this.#o = opts;
  }

  /**
   * Submits a job. Resolves with the accepted job (pending) and `done`, which resolves with its
   * final snapshot; rejects with the actor's refusal (VM_BUSY, VM_NOT_FOUND, ...).
   */
  async submit(
    vm: string,
    params: JobParams,
    observed: { exists: boolean; state: ObservedState | null },
  ): Promise<{ job: JobSnapshot; done: Promise<JobSnapshot> }> {
    if (this.#stopped) throw new SvcError('server.not_ready', 'the VM service is stopping');
    const jobId = publicTypeOf(params.kind) !== null ? newOperationId() : `job-${randomUUID()}`;
    const tracked: Tracked = { vm, last: null, createdAtMs: Date.now(), kind: params.kind, waiters: [] };
    // Registered before the call: in inline mode the actor's frames arrive before it returns.
    this.#jobs.set(jobId, tracked);
    const done = new Promise<JobSnapshot>((resolve) => tracked.waiters.push(resolve));
    const args: SubmitArgs = { jobId, params, observed, budgets: this.#o.budgets };
    let accepted: JobSnapshot;
    try {
      accepted = await this.#callActor<JobSnapshot>(vm, 'submit', args);
    } catch (err) {
      this.#jobs.delete(jobId);
      throw err;
    }
    this.#take(accepted);
    return { job: accepted, done };
  }

  /** Handles a frame emitted by a vm-ops actor; false for frames of other kinds. */
  handleFrame(kind: number, key: string, payload: Uint8Array): boolean {
    if (kind === VmFrameKind.kFrameVmJob) {
      this.#take(decodeJson<JobFrame>(payload).snapshot);
      return true;
    }
    if (kind === VmFrameKind.kFrameVmStep) {
      const req = decodeJson<StepRequest>(payload);
      void this.#runStep(key, req);
      return true;
    }
    return false;
  }

  /** Fails the jobs of vm-ops actors lost with a crashed shard. */
  handleShardRestart(lostActorIds: readonly string[]): void {
    const lostVms = new Set(lostActorIds.map(vmOfOpsActor).filter((v): v is string => v !== null));
    if (lostVms.size === 0) return;
    for (const [id, t] of [...this.#jobs]) {
      if (!lostVms.has(t.vm)) continue;
      const base = t.last;
      this.#take({
        id,
        type: t.kind,
        target: t.vm,
        status: 'failed',
        createdAtMs: base?.createdAtMs ?? t.createdAtMs,
        completedAtMs: Date.now(),
        progressPercent: base?.progressPercent ?? 0,
        result: null,
        seq: (base?.seq ?? 1) + 1,
        error: {
          code: 'actor.shard_restarted',
          message: `the worker shard running the operation queue of VM '${t.vm}' crashed; ${id} was abandoned (the VM may be half-changed: check its state)`,
        },
      });
    }
    this.#o.logger.error({ vms: [...lostVms] }, 'VM operation queues lost with a crashed shard');
  }

  /** Jobs queued or running on `vm` as its actor reports them ([] when it has none). */
  async status(vm: string): Promise<JobSnapshot[]> {
    try {
      return (await this.#o.actors.call<{ jobs: JobSnapshot[] }>(vmOpsActorId(vm), 'status')).jobs;
    } catch (err) {
      if (err instanceof SvcError && err.code === 'actor.not_found') return [];
      throw err;
    }
  }

  /** Refuses new jobs and aborts running steps (their jobs fail). Idempotent. */
  stop(): void {
    this.#stopped = true;
    this.#steps.abort(new SvcError('server.not_ready', 'the VM service is stopping'));
  }

  async #runStep(actorId: string, req: StepRequest): Promise<void> {
    let answer: StepAnswer;
    // The step bounds itself (and reports what timed out); the abort is the backstop.
    const signal = AbortSignal.any([this.#steps.signal, AbortSignal.timeout(Math.max(1, req.timeoutMs) + STEP_ABORT_GRACE_MS)]);
    try {
      const value = await this.#o.executor.run(req, signal);
      answer = { callId: req.callId, ok: true, value };
    } catch (err) {
      const wire =
        signal.aborted && !(err instanceof SvcError)
          ? {
              code: 'server.timeout' as const,
              message: `step ${req.step} of ${req.jobId} did not finish within ${req.timeoutMs + STEP_ABORT_GRACE_MS} ms`,
            }
          : toWire(err);
      if (wire.code === 'server.internal') this.#o.logger.error({ vm: req.vm, step: req.step, err }, 'VM step failed unexpectedly');
      answer = { callId: req.callId, ok: false, error: wire };
    }
    // A frame on the shard's inbound ring, not a call: no structured clone, no postMessage and no
    // reply to wait for. A full ring (PTY input queued ahead) holds it back, never drops it.
    const payload = encodeJson(answer);
    try {
      while (!this.#o.actors.send(actorId, VmFrameKind.kFrameVmStepDone, payload)) {
        await this.#o.actors.whenWritable(actorId, payload.byteLength);
      }
    } catch (err) {
      // The system is stopping: the job was failed elsewhere.
      this.#o.logger.warn({ vm: req.vm, step: req.step, err: errorMessage(err) }, 'could not hand a step result back to its VM queue');
    }
  }

  #take(s: JobSnapshot): void {
    const type = publicTypeOf(s.type);
    const t = this.#jobs.get(s.id);
    if (t === undefined) {
      // Already finished here (a late copy): the store ignores it unless it is news.
      if (type !== null) this.#o.store.upsert({ ...s, type });
      return;
    }
    const previous = t.last;
    if (previous !== null && previous.seq >= s.seq) return;
    t.last = s;
    if (type !== null) this.#o.store.upsert({ ...s, type });
    this.#o.onJob?.(s, previous);
    if (isTerminal(s.status)) {
      this.#jobs.delete(s.id);
      for (const w of t.waiters.splice(0)) w(s);
    }
  }

  async #callActor<T>(vm: string, method: string, args: unknown): Promise<T> {
    const id = vmOpsActorId(vm);
    try {
      return await this.#o.actors.call<T>(id, method, args);
    } catch (err) {
      if (!(err instanceof SvcError) || err.code !== 'actor.not_found') throw err;
    }
    try {
      await this.#o.actors.spawn(VM_OPS_ACTOR_TYPE, id, { vm, ...this.#o.actorInit } satisfies VmOpsInit);
    } catch (err) {
      // Spawned meanwhile by a concurrent request: fine.
      if (!(err instanceof SvcError) || err.code !== 'actor.already_exists') throw err;
    }
    return this.#o.actors.call<T>(id, method, args);
  }
}
