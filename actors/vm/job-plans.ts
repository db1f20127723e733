/**
 * What each job does, as data: the steps it asks the main thread to run, in order, the progress
 * reached after each, and the result it reports. Plus the admission rules of one VM's queue.
 *
 * | job          | steps (progress after)                                                                                  |
 * |--------------|---------------------------------------------------------------------------------------------------------|
 * | create       | define 10 · start 40 · agentUp 70 · agentWait 100   (start=false: define only; foreign/unmanaged: no agent) |
 * | deploy_agent | check(running) 10 · agentUp(restart) 70 · agentWait 100                                                  |
 * | restart      | check(running) 5 · agentDown 10 · shutdown 30 · waitStopped 50 · destroy 60 (only if still up) · start 70 · agentUp 85 · agentWait 100 (hard: no shutdown/waitStopped) |
 * | delete       | undefine(force) 60 · agentDown 80 · purgeFiles 100 (files only with delete_disk)                         |
 * | start        | start 50 · agentUp 100                                                                                  |
 * | stop         | shutdown 50 · agentDown 100                                                                             |
 * | destroy      | destroy 50 · agentDown 100                                                                              |
 *
 * Admission (a new job against the jobs already queued or running on the VM):
 * - a delete is queued or running → VM_BUSY: the VM is going away.
 * - a create is queued or running → a second create is VM_ALREADY_EXISTS, anything else VM_BUSY.
 * - a new delete while anything is queued or running → VM_BUSY (delete needs an idle VM).
 * - a new create while anything is queued or running → VM_ALREADY_EXISTS (the VM exists).
 * - more than MAX_QUEUED_JOBS → VM_BUSY.
 * - otherwise (restart, deploy-agent, start, stop, destroy) the job queues and runs after the
 *   earlier ones, in submission order.
 * When the queue is idle the job is also checked against the state the main thread observed
 * (404 VM_NOT_FOUND, 409 VM_ALREADY_EXISTS / VM_NOT_RUNNING / VM_RUNNING); a queued job is
 * checked again by its first step when its turn comes (and fails with that code).
 */
import { SvcError } from '../../src/core/errors.js';
import type { OperationSnapshot } from '../../src/core/operation-state.js';
import type { JobKind, JobParams, ObservedState, StepBudgets, StepResult, VmStepName } from '../protocol/vm-frames.js';

/** Jobs one VM may have queued or running at once. */
export const MAX_QUEUED_JOBS = 8;

/** What a job knows while it runs: its parameters and what its steps reported. */
export interface JobContext extends StepResult {
  readonly vm: string;
  readonly params: JobParams;
  readonly budgets: StepBudgets;
}

export interface PlanStep {
  readonly step: VmStepName;
  /** Progress reached once the step succeeded (100 = the last step). */
  readonly progress: number;
  readonly args?: (ctx: JobContext) => Record<string, unknown>;
  /** Skipped when this says false (evaluated when the step's turn comes). */
  readonly when?: (ctx: JobContext) => boolean;
  /** Main-thread bound; default budgets.stepTimeoutMs. */
  readonly timeoutMs?: (ctx: JobContext) => number;
}

export interface JobPlan {
  readonly steps: readonly PlanStep[];
  readonly result: (ctx: JobContext) => Record<string, unknown>;
}

const managed = (ctx: JobContext): boolean => ctx.managed === true;
const agentRuns = (ctx: JobContext): boolean => ctx.agentMode === 'local' || ctx.agentMode === 'cloud-init';
const agentWait: PlanStep = {
  step: 'agentWait',
  progress: 100,
  when: agentRuns,
  args: (ctx) => ({ sinceMs: ctx.agentSinceMs ?? 0 }),
  timeoutMs: (ctx) => ctx.budgets.agentConnectTimeoutMs,
};
const vmResult = (ctx: JobContext): Record<string, unknown> => ({ vm: { name: ctx.vm, state: ctx.state ?? 'unknown' } });
const lifecycleResult = (ctx: JobContext): Record<string, unknown> => ({
  vm: { name: ctx.vm, state: ctx.state ?? 'unknown' },
  already: ctx.already === true,
});

/** The plan of a job. */
export function planOf(params: JobParams): JobPlan {
  switch (params.kind) {
    case 'create': {
      const c = params.create;
      const started = (): boolean => c.start;
      return {
        steps: [
          { step: 'define', progress: 10, args: () => ({ ...c }) },
          { step: 'start', progress: 40, when: started },
          { step: 'agentUp', progress: 70, when: (ctx) => started() && managed(ctx), args: () => ({ restart: false }) },
          agentWait,
        ],
        result: vmResult,
      };
    }
    case 'deploy_agent':
      return {
        steps: [
          { step: 'check', progress: 10, args: () => ({ require: 'running' }) },
          { step: 'agentUp', progress: 70, when: managed, args: () => ({ restart: true }) },
          agentWait,
        ],
        result: vmResult,
      };
    case 'restart': {
      const graceful = params.mode === 'graceful';
      const timeoutMs = params.gracefulTimeoutMs;
      return {
        steps: [
          { step: 'check', progress: 5, args: () => ({ require: 'running' }) },
          { step: 'agentDown', progress: 10, when: managed },
          { step: 'shutdown', progress: 30, when: () => graceful },
          {
            step: 'waitStopped',
            progress: 50,
            when: () => graceful,
            args: () => ({ timeoutMs }),
            timeoutMs: (ctx) => timeoutMs + ctx.budgets.stepTimeoutMs,
          },
          { step: 'destroy', progress: 60, when: (ctx) => !graceful || ctx.stopped !== true },
          { step: 'start', progress: 70 },
          { step: 'agentUp', progress: 85, when: managed, args: () => ({ restart: false }) },
          agentWait,
        ],
        result: (ctx) => ({ ...vmResult(ctx), mode: params.mode, forced: !graceful || ctx.stopped !== true }),
      };
    }
    case 'delete': {
      const { force, deleteDisk } = params;
      return {
        steps: [
          { step: 'undefine', progress: 60, args: () => ({ force }) },
          { step: 'agentDown', progress: 80 },
          { step: 'purgeFiles', progress: 100, args: (ctx) => ({ deleteDisk, disks: ctx.disks ?? [] }) },
        ],
        result: (ctx) => ({ deleted: true, name: ctx.vm, disk_deleted: ctx.diskDeleted === true }),
      };
    }
    case 'start':
      return {
        steps: [
          { step: 'start', progress: 50 },
          { step: 'agentUp', progress: 100, when: managed, args: () => ({ restart: false }) },
        ],
        result: lifecycleResult,
      };
    case 'stop':
      return {
        steps: [
          { step: 'shutdown', progress: 50 },
          { step: 'agentDown', progress: 100 },
        ],
        result: lifecycleResult,
      };
    case 'destroy':
      return {
        steps: [
          { step: 'destroy', progress: 50 },
          { step: 'agentDown', progress: 100 },
        ],
        result: lifecycleResult,
      };
  }
}

function describeJob(j: OperationSnapshot<JobKind>): string {
  const what =
    j.type === 'create'
      ? 'vm_create'
      : j.type === 'delete'
        ? 'vm_delete'
        : j.type === 'restart'
          ? 'vm_restart'
          : j.type === 'deploy_agent'
            ? 'vm_create (deploy-agent)'
            : j.type;
  return `${what} ${j.id} (${j.status}, ${j.progressPercent}%)`;
}

/**
 * Admission of a new job of `kind` on `vm`, given the jobs queued or running there (oldest
 * first) and what the main thread observed. Returns the refusal, or null to accept.
 */
export function admissionError(
  vm: string,
  params: JobParams,
  queue: readonly OperationSnapshot<JobKind>[],
  observed: { exists: boolean; state: ObservedState | null },
): SvcError | null {
  const kind = params.kind;
  if (queue.length > 0) {
    const deleting = queue.find((j) => j.type === 'delete');
    if (deleting !== undefined) return busy(`VM '${vm}' is being deleted by ${describeJob(deleting)}`, deleting);
    const creating = queue.find((j) => j.type === 'create');
    if (creating !== undefined) {
      if (kind === 'create')
        return new SvcError('VM_ALREADY_EXISTS', `VM '${vm}' is already being created by ${describeJob(creating)}`, {
          operation_id: creating.id,
        });
      return busy(`VM '${vm}' is being created by ${describeJob(creating)}; retry when it has finished`, creating);
    }
    const head = queue[0]!;
    if (kind === 'create') return new SvcError('VM_ALREADY_EXISTS', `VM '${vm}' already exists (${describeJob(head)} is in progress)`);
    if (kind === 'delete')
      return busy(
        `VM '${vm}' has ${queue.length} operation(s) in progress (${describeJob(head)}); delete it once they have finished`,
        head,
      );
    if (queue.length >= MAX_QUEUED_JOBS)
      return busy(`VM '${vm}' already has ${queue.length} operations queued (the limit); ${describeJob(head)} is running`, head);
    return null;
  }
  if (kind === 'create') return observed.exists ? new SvcError('VM_ALREADY_EXISTS', `VM '${vm}' already exists`) : null;
  if (!observed.exists) return new SvcError('VM_NOT_FOUND', `VM '${vm}' not found`);
  if ((kind === 'restart' || kind === 'deploy_agent') && observed.state !== 'running') {
    return new SvcError('VM_NOT_RUNNING', `VM '${vm}' is ${observed.state ?? 'unknown'}, not running; start it first`);
  }
  if (kind === 'delete' && !params.force && observed.state !== 'stopped' && observed.state !== 'crashed') {
    return new SvcError('VM_RUNNING', `VM '${vm}' is ${observed.state ?? 'unknown'}; stop it first or delete with force=true`);
  }
  return null;
}

function busy(message: string, blocking: OperationSnapshot<JobKind>): SvcError {
  return new SvcError('VM_BUSY', message, { operation_id: blocking.id, operation_status: blocking.status });
}
