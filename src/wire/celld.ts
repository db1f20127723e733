/**
 * Celld's wire shapes (spec 4.13; the shapes are ours, the spec leaves them "not shown"): the
 * readiness record of GET /api/v2/celld/status, the cell command document, the effect-ledger record
 * a client reads to resolve an unknown outcome, and the non-mutating reports. JSON Schemas of the
 * records: src/celld/*.schema.json. A leaf: imports nothing outside src/wire.
 */

/** What every provider may advertise (spec 4.13: actions exist only when advertised). */
export const PROVIDER_CAPABILITIES = ['snapshot', 'checkpoint', 'fork', 'warm_pool'] as const;
export type ProviderCapability = (typeof PROVIDER_CAPABILITIES)[number];

/** One hypervisor host's provider and what it advertises (no URI: it may hold a path or a host name). */
export interface ProviderCapabilitySet {
  /** libvirt driver of the host: `test`, `qemu`, ... */
  provider: string;
  /** The host's position in SVC_HYPERVISOR_URI (0-based); the URI itself is not shown. */
  host_index: number;
  capabilities: Record<ProviderCapability, boolean>;
  /** Why each missing capability is missing. */
  reasons: Partial<Record<ProviderCapability, string>>;
}

/** GET /api/v2/admin/hypervisor/capabilities. */
export interface CapabilitiesResponse {
  providers: ProviderCapabilitySet[];
  /** Each VM's advertised capabilities (those its host's provider advertises), by VM name. */
  vms: Record<string, ProviderCapability[]>;
}

export const CELLD_READINESS = ['secure', 'ready', 'disabled', 'degraded'] as const;
export type CelldReadiness = (typeof CELLD_READINESS)[number];

/** The Celld commands, as status lists their availability. */
export const CELLD_COMMANDS = ['validate', 'preflight', 'diagnose', 'plan_upgrade', 'cell_read', 'command', 'reconcile'] as const;
export type CelldCommandName = (typeof CELLD_COMMANDS)[number];

/** GET /api/v2/celld/status (schema sandboxd.celld-status/v1). No path, URI or secret. */
export interface CelldStatus {
  schema_version: 'sandboxd.celld-status/v1';
  enabled: boolean;
  configured: boolean;
  cell_id: string | null;
  /** The backend class (SVC_CELLD_BACKEND); null while disabled. */
  backend: string | null;
  readiness: CelldReadiness;
  /** Stable code of why not secure/ready (celld.disabled, celld.not_configured, celld.hypervisor_unavailable, ...); null when ready. */
  reason_code: string | null;
  reason: string | null;
  commands: Record<CelldCommandName, boolean>;
  versions: { sandboxd: string; protocol: string; command_schema: string };
  hypervisor: { status: 'ok' | 'degraded' | 'down'; hosts: number; providers: ProviderCapabilitySet[] };
  agent_listener: { listening: boolean };
  fleet: { linked: boolean; inventory_revision: number | null };
  /** True when operator calls can come over the mutually authenticated admin listener. */
  secure_transport: boolean;
}

export const CELL_ACTIONS = ['start', 'stop', 'destroy', 'reconcile'] as const;
export type CellAction = (typeof CELL_ACTIONS)[number];

/** A cell command document (schema sandboxd.celld-command/v1). */
export interface CellCommandDocument {
  schema_version: 'sandboxd.celld-command/v1';
  /** Client-chosen, ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$: the ledger key. */
  operation_id: string;
  cell_id: string;
  action: CellAction;
  /** start, stop, destroy: the VMs (1-100 distinct names). */
  targets?: string[];
  /** reconcile: the previewed inventory revision (the fleet's before_revision). */
  generation?: number;
  /** reconcile: plan only. Default false. */
  dry_run?: boolean;
  /** Optional: sha256 hex of the canonical JSON of the document without this field; checked when present. */
  request_hash?: string;
}

/** POST /api/v2/celld/cells/{cell}/reconcile: a generation-only reconcile (never replayable). */
export interface GenerationReconcileRequest {
  operation_id: string;
  generation: number;
}

export const CELL_COMMAND_STATUSES = ['accepted', 'running', 'succeeded', 'failed', 'unknown'] as const;
export type CellCommandStatus = (typeof CELL_COMMAND_STATUSES)[number];

/** One effect-ledger entry (schema sandboxd.celld-command-record/v1): GET .../commands/{operation_id}. */
export interface CellCommandRecord {
  schema_version: 'sandboxd.celld-command-record/v1';
  operation_id: string;
  cell_id: string;
  action: CellAction;
  /** sha256 hex of the canonical JSON of the stored request. */
  request_hash: string;
  /** document: a full command document (replayable); generation_only: a generation-only reconcile (not replayable). */
  kind: 'document' | 'generation_only';
  replayable: boolean;
  status: CellCommandStatus;
  /** The operation of the one operations store that carries the effect (poll /api/v2/admin/operations/{id}). */
  management_operation_id: string | null;
  outcome: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
  actor: string;
  accepted_at: string;
  finished_at: string | null;
}

/** 202/200 of a command: the ledger entry, whether it is a replay, and the operation. */
export interface CellCommandAccepted {
  replayed: boolean;
  command: CellCommandRecord;
}

export interface ValidationProblem {
  path: string;
  message: string;
}

export interface ValidateReport {
  valid: boolean;
  mutating: false;
  request_hash: string | null;
  problems: ValidationProblem[];
}

export interface CheckResult {
  name: string;
  status: 'pass' | 'warn' | 'fail' | 'skip';
  detail: string;
}

export interface PreflightReport {
  ok: boolean;
  mutating: false;
  cell_id: string;
  checks: CheckResult[];
}

export interface DiagnoseFinding {
  kind: 'vm_running_without_agent' | 'agent_without_vm' | 'agent_connected_vm_not_running' | 'agent_unhealthy';
  vm: string;
  detail: string;
}

export interface DiagnoseReport {
  healthy: boolean;
  mutating: false;
  cell_id: string;
  observed_at: string;
  vms: number;
  agents: number;
  findings: DiagnoseFinding[];
}

export interface UpgradePlan {
  mutating: false;
  cell_id: string;
  from: string;
  to: string;
  /** none: same version; upgrade / downgrade: a restart of sandboxd; refused: not a plan (reason says why). */
  kind: 'none' | 'upgrade' | 'downgrade' | 'refused';
  qualified: boolean;
  reason: string | null;
  /** VMs keep running across a sandboxd restart; agents reconnect. */
  running_vms: number;
  connected_agents: number;
  steps: string[];
}

/** GET /api/v2/celld/cells/{cell}: the scoped cell read. */
export interface CellState {
  cell_id: string;
  backend: string;
  observed_at: string;
  vms: { name: string; state: string; agent: string | null }[];
  inventory_revision: number | null;
  commands: { total: number; unknown: number; running: number };
}
