/**
 * Wire shapes of the v2 fleet routes (spec 4.13; the spec names lineage, desired/observed state,
 * revision, runtime identities, last observation, artifact evidence and inventory_revision /
 * before_revision, the rest is ours — README "Fleet inventory and reconcile"). Shared by the
 * routes, the client, `sbx fleet` and the Celld helper (through src/fleet/port.ts).
 * JSON Schema of a workload: src/fleet/fleet-workload-v1.schema.json.
 */

/** What a workload's desired and observed sides disagree on (see README for each). */
export const WORKLOAD_DRIFTS = ['none', 'pending', 'missing', 'state_mismatch', 'unmanaged', 'foreign'] as const;
export type WorkloadDrift = (typeof WORKLOAD_DRIFTS)[number];

/** How a desired workload came to be desired. */
export const WORKLOAD_ORIGINS = ['vm_create', 'checkpoint_restore', 'warm_pool_handoff', 'adopted'] as const;
export type WorkloadOrigin = (typeof WORKLOAD_ORIGINS)[number];

/** What a reconcile does (or would do) to one workload. */
export const RECONCILE_ACTIONS = ['create', 'delete', 'start', 'stop', 'none'] as const;
export type ReconcileAction = (typeof RECONCILE_ACTIONS)[number];

/** What came of it (terminal operation result). */
export const RECONCILE_OUTCOMES = ['created', 'deleted', 'started', 'stopped', 'left_alone', 'failed'] as const;
export type ReconcileOutcome = (typeof RECONCILE_OUTCOMES)[number];

/** Who asked for a workload (the operator identity of the request that made it desired). */
export interface WorkloadOwner {
  /** Operator name (mTLS certificate CN) or `local` on the trusted local listener; null when unknown. */
  actor: string | null;
  /** `mtls`, `local`, or `system` (adopted at first start, or made by sandboxd itself). */
  mode: string;
}

/** What sandboxd is supposed to run. */
export interface WorkloadDesired {
  /** `running` (created with start true, or started through the API) or `stopped`. */
  state: 'running' | 'stopped';
  /** The create request's profile string, as given (startup profiles may add names). */
  profile: string;
  /** The create request's loadout, as given; null when none was asked for. */
  loadout: string | null;
  vcpus: number;
  memory_mb: number;
  disk_gb: number;
  /** The host URI (redacted) the VM was placed on; null until it was first observed. */
  host: string | null;
  owner: WorkloadOwner;
  /** Free-form owner labels (`sandboxd/created-by`, ...). */
  labels: Record<string, string>;
  /** When it became desired (ISO 8601). */
  since: string;
}

/** Where a desired workload came from (artifact evidence: the operation and checkpoint that made it). */
export interface WorkloadLineage {
  origin: WorkloadOrigin;
  /** The operation that created it (op-<uuid>); null when adopted. */
  operation_id: string | null;
  checkpoint_id: string | null;
  pool: string | null;
}

/** The libvirt domain as last seen. */
export interface ObservedDomain {
  state: string;
  uuid: string;
  host: string;
  vcpus: number;
  memory_mb: number;
  /** sandboxd's metadata instance id; null for a domain sandboxd did not make. */
  instance_id: string | null;
  /** Carries sandboxd's management metadata (an instance id). */
  managed: boolean;
  /** sandboxd's labels in the domain metadata (`sandboxd/agentshare`, `sandboxd/enrollment`, ...). */
  labels: Record<string, string>;
}

/** The VM's agent in the agents registry, as last seen. */
export interface ObservedAgent {
  connected: boolean;
  /** Agent status (Starting, Ready, Busy, ...). */
  status: string;
  instance_id: string;
}

export interface WorkloadObserved {
  /** null: no domain of this name on any host. */
  domain: ObservedDomain | null;
  /** null: no agent of this VM known to the registry. */
  agent: ObservedAgent | null;
  /** When this observation last changed (ISO 8601); null if never observed. */
  changed_at: string | null;
}

/** One fleet workload: desired joined with observed. */
export interface WorkloadJson {
  schema: 'fleet.workload/v1';
  /** The VM name. */
  name: string;
  /** null: not desired (an unmanaged or foreign domain). */
  desired: WorkloadDesired | null;
  lineage: WorkloadLineage | null;
  observed: WorkloadObserved;
  /** Runtime identities: the domain uuid and the agent instance id, when known. */
  runtime: { uuid: string | null; instance_id: string | null };
  drift: WorkloadDrift;
  /** Why the drift is what it is, in words. */
  drift_reason: string;
  /** The inventory_revision at which this workload last changed. */
  revision: number;
  /** The unfinished operation on it (a create still running), if any. */
  pending_operation_id: string | null;
  /** The last reconcile that acted on it: operation id and outcome. */
  last_reconcile: { operation_id: string; outcome: ReconcileOutcome; at: string } | null;
}

/** GET /api/v2/fleet/workloads answer. */
export interface FleetWorkloadsResponse {
  inventory_revision: number;
  /** When the hypervisor was last swept (not part of the revision). */
  last_sweep_at: string | null;
  /** A sweep error, when the last one failed (the observed sides are then as of the one before). */
  sweep_error: string | null;
  workloads: WorkloadJson[];
  total: number;
  /** Workloads per drift. */
  drift_counts: Record<WorkloadDrift, number>;
}

/** POST /api/v2/fleet/reconcile body. */
export interface FleetReconcileRequest {
  /** Must equal the current inventory_revision, else 409 fleet.stale_inventory_revision. */
  before_revision: number;
  /** Only plan (200), act on nothing. Default false. */
  dry_run?: boolean;
}

/** One step of a plan. */
export interface ReconcilePlanStep {
  workload: string;
  drift: WorkloadDrift;
  action: ReconcileAction;
  reason: string;
}

/** The plan (dry run answer, and the start of a reconcile). */
export interface ReconcilePlanJson {
  inventory_revision: number;
  steps: ReconcilePlanStep[];
}

/** One step as the reconcile operation's terminal result lists it. */
export interface ReconcileStepResult extends ReconcilePlanStep {
  outcome: ReconcileOutcome;
  /** The VM operation it ran (create), if any. */
  operation_id: string | null;
  /** Why it failed. */
  error: string | null;
}

/** The terminal result of a fleet_reconcile operation (classification evidence). */
export interface ReconcileResultJson {
  before_revision: number;
  /** The inventory_revision once every step finished. */
  after_revision: number;
  actor: string;
  steps: ReconcileStepResult[];
  counts: Record<ReconcileOutcome, number>;
}

/** POST /api/v2/fleet/reconcile with dry_run: 200. */
export interface FleetReconcileDryRun {
  dry_run: true;
  before_revision: number;
  plan: ReconcilePlanJson;
}
