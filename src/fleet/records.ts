/**
 * A fleet workload as the inventory keeps it (desired, observed, last reconcile), its JSON
 * (schema fleet.workload/v1, src/fleet/fleet-workload-v1.schema.json) and its drift: what the
 * desired and observed sides disagree on, and what a reconcile does about it (README "Fleet
 * inventory and reconcile" has the table).
 */
import type {
  ObservedAgent,
  ObservedDomain,
  ReconcileAction,
  ReconcileOutcome,
  ReconcilePlanStep,
  WorkloadDrift,
  WorkloadJson,
  WorkloadOrigin,
  WorkloadOwner,
} from '../wire/fleet.js';

/** The label a pre-enrollment (checkpoint or warm-pool candidate) VM carries (src/vms/provisioner.ts ENROLLMENT_LABEL). */
export const DEFERRED_ENROLLMENT_LABEL = 'sandboxd/enrollment';

export interface DesiredRecord {
  readonly state: 'running' | 'stopped';
  readonly profile: string;
  readonly loadout: string | null;
  readonly vcpus: number;
  readonly memoryMiB: number;
  readonly diskGiB: number;
  readonly agentshare: boolean;
  readonly host: string | null;
  readonly owner: WorkloadOwner;
  readonly labels: Readonly<Record<string, string>>;
  readonly sinceMs: number;
  readonly origin: WorkloadOrigin;
  readonly operationId: string | null;
  readonly checkpointId: string | null;
  readonly pool: string | null;
  /** The unfinished operation that makes it (create, restore, handoff, a reconcile's create); null once it finished. */
  readonly pendingOperationId: string | null;
}

export interface ObservedRecord {
  readonly domain: ObservedDomain | null;
  readonly agent: ObservedAgent | null;
  readonly changedAtMs: number | null;
}

export interface LastReconcile {
  readonly operationId: string;
  readonly outcome: ReconcileOutcome;
  readonly atMs: number;
}

/** What is stored and compared (key order fixed: see content()). */
export interface WorkloadContent {
  readonly desired: DesiredRecord | null;
  readonly observed: ObservedRecord;
  readonly lastReconcile: LastReconcile | null;
}

export interface WorkloadRecord extends WorkloadContent {
  readonly name: string;
  readonly revision: number;
}

export const NOT_OBSERVED: ObservedRecord = { domain: null, agent: null, changedAtMs: null };

/** Builds content in the one key order the store compares by. */
export function content(desired: DesiredRecord | null, observed: ObservedRecord, lastReconcile: LastReconcile | null): WorkloadContent {
  return { desired, observed, lastReconcile };
}

/** Whether an operation id is still unfinished (pending or running). */
export type IsUnfinished = (operationId: string) => boolean;

/** The unfinished operation running on a VM (a create, delete, restart, checkpoint, restore ...), or null. */
export type BusyWith = (vmName: string) => string | null;

const NOT_BUSY: BusyWith = () => null;

const RUNNING_STATES = new Set(['running']);
const STARTABLE_STATES = new Set(['stopped', 'shutdown', 'crashed']);
const STOPPABLE_STATES = new Set(['running', 'paused', 'suspended']);

/** The drift of a workload and the step a reconcile takes for it. */
export function classify(r: WorkloadRecord, unfinished: IsUnfinished, busy: BusyWith = NOT_BUSY): ReconcilePlanStep {
  const step = (drift: WorkloadDrift, action: ReconcileAction, reason: string): ReconcilePlanStep => ({
    workload: r.name,
    drift,
    action,
    reason,
  });
  const d = r.desired;
  const dom = r.observed.domain;
  if (d === null) {
    if (dom === null) return step('none', 'none', 'neither desired nor present');
    if (!dom.managed) return step('foreign', 'none', 'a domain sandboxd did not make (no sandboxd metadata): never touched');
    const op = busy(r.name);
    if (op !== null) return step('unmanaged', 'none', `operation ${op} is running on it: looked at again once it ended`);
    if (dom.labels[DEFERRED_ENROLLMENT_LABEL] === 'deferred') {
      return step('unmanaged', 'none', 'a pre-enrollment VM (checkpoint or warm-pool candidate): left to the checkpoint feature');
    }
    return step('unmanaged', 'delete', "carries sandboxd metadata but is not desired (made or kept behind sandboxd's back)");
  }
  if (d.pendingOperationId !== null && unfinished(d.pendingOperationId)) {
    return step('pending', 'none', `operation ${d.pendingOperationId} is still making it`);
  }
  const op = busy(r.name);
  if (op !== null) return step('pending', 'none', `operation ${op} is running on it: looked at again once it ended`);
  if (dom === null) return step('missing', 'create', 'desired but no domain of this name on any host: created from its recorded spec');
  if (d.state === 'running' && !RUNNING_STATES.has(dom.state)) {
    return STARTABLE_STATES.has(dom.state)
      ? step('state_mismatch', 'start', `desired running, observed ${dom.state}`)
      : step('state_mismatch', 'none', `desired running, observed ${dom.state}: only a stopped, shut down or crashed VM is started`);
  }
  if (d.state === 'stopped' && STOPPABLE_STATES.has(dom.state)) {
    return step('state_mismatch', 'stop', `desired stopped, observed ${dom.state}: forced off`);
  }
  return step('none', 'none', 'desired and observed agree');
}

/** The workload's JSON (fleet.workload/v1). */
export function workloadJson(r: WorkloadRecord, unfinished: IsUnfinished, busy: BusyWith = NOT_BUSY): WorkloadJson {
  const d = r.desired;
  const { drift, reason } = classify(r, unfinished, busy);
  const iso = (ms: number): string => new Date(ms).toISOString();
  return {
    schema: 'fleet.workload/v1',
    name: r.name,
    desired:
      d === null
        ? null
        : {
            state: d.state,
            profile: d.profile,
            loadout: d.loadout ?? null,
            vcpus: d.vcpus,
            memory_mb: d.memoryMiB,
            disk_gb: d.diskGiB,
            host: d.host,
            owner: d.owner,
            labels: { ...d.labels },
            since: iso(d.sinceMs),
          },
    lineage: d === null ? null : { origin: d.origin, operation_id: d.operationId, checkpoint_id: d.checkpointId, pool: d.pool },
    observed: {
      domain: r.observed.domain,
      agent: r.observed.agent,
      changed_at: r.observed.changedAtMs === null ? null : iso(r.observed.changedAtMs),
    },
    runtime: {
      uuid: r.observed.domain?.uuid ?? null,
      instance_id: r.observed.domain?.instance_id ?? r.observed.agent?.instance_id ?? null,
    },
    drift,
    drift_reason: reason,
    revision: r.revision,
    pending_operation_id:
      d?.pendingOperationId !== undefined && d.pendingOperationId !== null && unfinished(d.pendingOperationId)
        ? d.pendingOperationId
        : null,
    last_reconcile:
      r.lastReconcile === null
        ? null
        : { operation_id: r.lastReconcile.operationId, outcome: r.lastReconcile.outcome, at: iso(r.lastReconcile.atMs) },
  };
}
