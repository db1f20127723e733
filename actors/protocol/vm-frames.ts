/**
 * The contract between the main thread and the VM operation-queue actors (`vm-ops`, id
 * `agent:<vm_name>/vm-ops`): frame kinds, call methods and their JSON payloads.
 *
 * Why the work is split this way: the actor owns ordering and the operation state machine, but
 * every hypervisor call must run on the main thread (the @unraid/libvirt binding crashes the
 * process when loaded in a worker), and so must certificate issuance and agent processes. So
 * the actor never touches the outside world: it asks the main thread to run one *step* at a time
 * and waits for the answer. The queue actors live on the main thread in both modes
 * (`mainThreadActorTypes` in actors/vm/vm-ops.actor.ts, ActorSystem "Placement"): all their steps
 * are main-thread work, so a worker only added crossings and thread wake-ups to every operation.
 * The request and its answer are frames all the same (the actor is still an actor, with its
 * ordering and backpressure rules): a lost answer (the actor stopped meanwhile) is counted and
 * logged as an undeliverable frame, and the actor's step timeout fails a job whose answer never
 * comes. Submitting is a call: its answer (the accepted job or the refusal) is the HTTP reply, and
 * a missing actor must be reported so the main thread can spawn it.
 *
 * actor → main (emit; key = the actor id; payload = UTF-8 JSON; numbers in frame-kinds.ts)
 *   kFrameVmStep      StepRequest: run this step and answer with kFrameVmStepDone
 *   kFrameVmJob       JobFrame: a job's snapshot after every change (seq grows; stale copies lose)
 *
 * main → actor (ActorSystem.send; key = the actor id; payload = UTF-8 JSON)
 *   kFrameVmStepDone  StepAnswer: the answer to the step request with the same callId
 *
 * main → actor (ActorSystem.call)
 *   submit(SubmitArgs)   → OperationSnapshot<JobKind>; rejects VM_BUSY, VM_NOT_FOUND, ...
 *   stepDone(StepAnswer) → void (the same as a kFrameVmStepDone frame)
 *   status()             → QueueStatus
 */
import type { WireError } from '../../src/core/errors.js';
import type { OperationSnapshot, OperationType } from '../../src/core/operation-state.js';

export { VmFrameKind } from './frame-kinds.js';
export { decodeJson, encodeJson } from './frames.js';

/** Actor type name of the per-VM operation queue. */
export const VM_OPS_ACTOR_TYPE = 'vm-ops';

/**
 * The queue actor of VM `vmName`. It shares the placement key `agent:<vm_name>` with the VM's
 * agent-connection actor (the local agent's agent_id is the VM name), so both live in one shard.
 */
export function vmOpsActorId(vmName: string): string {
  return `agent:${vmName}/vm-ops`;
}

/** The VM name of a `agent:<vm>/vm-ops` id, or null. */
export function vmOfOpsActor(actorId: string): string | null {
  const m = /^agent:([^/]+)\/vm-ops$/.exec(actorId);
  return m?.[1] ?? null;
}

/** Spawn argument of a queue actor. */
export interface VmOpsInit {
  vm: string;
  /** An idle queue stops itself after this long, ms. Default 10 minutes (IDLE_STOP_MS, vm-ops.actor.ts). */
  idleStopMs?: number;
  /** Extra time the actor waits for a step's answer beyond the step's own timeout, ms. Default 30 s (STEP_GRACE_MS). */
  stepGraceMs?: number;
}

/** What the queue runs. create/delete/restart/deploy_agent are the spec's operations; start/stop/destroy are internal jobs (synchronous 200 routes) queued with them so one VM's changes apply in order. */
export const JOB_KINDS = ['create', 'delete', 'restart', 'deploy_agent', 'start', 'stop', 'destroy'] as const;
export type JobKind = (typeof JOB_KINDS)[number];

/** The operation type a job reports, or null for internal jobs. */
export function publicTypeOf(kind: JobKind): OperationType | null {
  switch (kind) {
    case 'create':
    case 'deploy_agent':
      return 'vm_create';
    case 'delete':
      return 'vm_delete';
    case 'restart':
      return 'vm_restart';
    default:
      return null;
  }
}

/** VM states as the main thread observed them (the port's VmState, restated so actors stay off src/hypervisor). */
export type ObservedState = 'running' | 'stopped' | 'paused' | 'shutdown' | 'crashed' | 'suspended' | 'unknown';

export interface CreateParams {
  uuid: string;
  vcpus: number;
  memoryMiB: number;
  diskGiB: number;
  profile: string;
  agentshare: boolean;
  start: boolean;
  /** `deferred`: defined with label sandboxd/enrollment=deferred; its agent waits for bootstrap material. */
  enrollment?: 'mtls' | 'deferred';
  /** OpenSSH public keys to install (already filtered by the direct-runtime-SSH policy). */
  sshKeys: string[]; /** The loadout applied at provisioning (src/loadouts; label sandboxd/loadout). */
  loadout?: string;
}

export type JobParams =
  | { kind: 'create'; create: CreateParams }
  | { kind: 'delete'; force: boolean; deleteDisk: boolean }
  | { kind: 'restart'; mode: 'graceful' | 'hard'; gracefulTimeoutMs: number }
  | { kind: 'deploy_agent' | 'start' | 'stop' | 'destroy' };

export interface SubmitArgs {
  /** op-<uuid> for operations, job-<uuid> for internal jobs (main makes it). */
  jobId: string;
  params: JobParams;
  /** What the main thread saw just before submitting (used when the queue is idle). */
  observed: { exists: boolean; state: ObservedState | null };
  budgets: StepBudgets;
}

export interface StepBudgets {
  /** Bound of a hypervisor or agent-process step, ms. */
  stepTimeoutMs: number;
  /** How long provisioning waits for the VM's agent to connect, ms. */
  agentConnectTimeoutMs: number;
}

export const VM_STEP_NAMES = [
  'check',
  'define',
  'start',
  'shutdown',
  'destroy',
  'waitStopped',
  'undefine',
  'purgeFiles',
  'agentUp',
  'agentDown',
  'agentWait',
] as const;
export type VmStepName = (typeof VM_STEP_NAMES)[number];

/** actor → main: run one step. */
export interface StepRequest {
  callId: number;
  jobId: string;
  vm: string;
  step: VmStepName;
  args: Record<string, unknown>;
  /** The main thread gives up after this long (the actor waits a grace period longer). */
  timeoutMs: number;
}

/**
 * What a step reports; the actor merges the fields into the job's context (later steps and the
 * result read them). Every field is optional.
 */
export interface StepResult {
  state?: ObservedState;
  /** The VM was provisioned by sandboxd (has an agent instance id): agent steps apply. */
  managed?: boolean;
  /** The lifecycle call found the VM already there (idempotent start/stop/destroy). */
  already?: boolean;
  /** waitStopped: the guest powered off within the timeout. */
  stopped?: boolean;
  /** agentUp: the agent process (or guest agent) was (re)started at this Unix ms. */
  agentSinceMs?: number;
  /** agentUp: how the agent runs: local process, cloud-init in the guest, or none (foreign VM). */
  /** `deferred`: a VM whose agent waits for bootstrap material (not awaited). */
  agentMode?: 'local' | 'cloud-init' | 'none' | 'deferred';
  /** undefine: the VM's disk paths, for purgeFiles. */
  disks?: string[];
  diskDeleted?: boolean;
  hostname?: string | null;
}

/** main → actor: the answer to a StepRequest. */
export type StepAnswer = { callId: number; ok: true; value: StepResult } | { callId: number; ok: false; error: WireError };

/** actor → main: one job's state. */
export interface JobFrame {
  kind: JobKind;
  snapshot: OperationSnapshot<JobKind>;
}

export interface QueueStatus {
  vm: string;
  jobs: OperationSnapshot<JobKind>[];
}
