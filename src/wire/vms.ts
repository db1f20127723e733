/**
 * The HTTP API's wire shapes, declared once: VMs and operations (spec 4.3, 4.4, part 2) and the
 * container image catalog (4.16). Times: `*_at` strings are ISO 8601 UTC.
 * A leaf: imports nothing outside src/wire.
 */

// ---------------------------------------------------------------- VMs and operations (4.3, 4.4)

/** The spec's VM states (part 2). */
export const VM_STATES = ['running', 'stopped', 'paused', 'shutdown', 'crashed', 'suspended', 'unknown'] as const;
export type VmState = (typeof VM_STATES)[number];

/**
 * The spec's VM JSON (part 2); how the server fills it: src/vms/vm-view.ts.
 */
export interface Vm {
  name: string;
  state: VmState;
  uuid: string;
  vcpus: number;
  memory_mb: number;
  /** '' when unknown. */
  ip_address: string;
  /** Null when not running or started before sandboxd saw it. */
  uptime_seconds: number | null;
}

/** GET /api/v1/vms/{name}: the VM plus its agent (and our host, profile, disk_gb, accelerator). */
export interface VmDetail extends Vm {
  /** connected false and no other field when no agent of this VM is known; connected_at is Unix ms. */
  agent: { connected: boolean; connected_at?: number; hostname?: string };
  host: string;
  profile: string | null;
  disk_gb: number | null;
  /** kvm | tcg on qemu hosts; null on the test driver. */
  accelerator: 'kvm' | 'tcg' | null;
}

export interface VmList {
  vms: Vm[];
  total: number;
}

/** POST /api/v1/vms body (spec 4.3). Only `name` is required. */
export interface VmCreateRequest {
  /** ^agent-[a-z0-9-]+$ */
  name: string;
  /** svc-dev (default), basic, or a startup profile's name (/api/v2/startup-profiles). */
  profile?: string;
  /** A loadout's name (/api/v2/loadouts): applied at provisioning; overrides the profile's. */
  loadout?: string;
  /** Default 4. */
  vcpus?: number;
  /** Default 8192. */
  memory_mb?: number;
  /** Default 50. */
  disk_gb?: number;
  /** Default true. */
  agentshare?: boolean;
  /** Default true: start after provisioning. */
  start?: boolean;
  ssh_key?: string;
  /** Ours: `mtls` (default) or `deferred`, an agent with no identity yet, to checkpoint before enrollment (spec 4.10). */
  enrollment?: 'mtls' | 'deferred';
}

/** POST /api/v1/vms/{name}/restart body. */
export interface VmRestartRequest {
  /** graceful (default, ACPI shutdown) or hard. */
  mode?: 'graceful' | 'hard';
  /** Seconds to wait for a graceful shutdown before forcing; default 60. */
  timeout_seconds?: number;
}

/**
 * The operation types: the spec's three (deploy-agent reports vm_create), then the v2 admin ones
 * (spec 4.10, polled at /api/v2/admin/operations/{id}): a pre-enrollment checkpoint, a restore,
 * a warm pool's creation and a handoff from it.
 */
export const OPERATION_TYPES = [
  'vm_create',
  'vm_delete',
  'vm_restart',
  'checkpoint_create',
  'checkpoint_restore',
  'warm_pool_create',
  'warm_pool_handoff',
  // Celld (README "Celld"): a mutating cell command; target is the cell id
  'celld_command',
  'fleet_reconcile',
] as const;
export type OperationType = (typeof OPERATION_TYPES)[number];

/** The operation statuses (machine: src/core/operation-state.ts). */
export const OPERATION_STATUSES = ['pending', 'running', 'completed', 'failed'] as const;
export type OperationStatus = (typeof OPERATION_STATUSES)[number];

/**
 * The spec's Operation object (part 2). `error_code` is ours: the error-table code of `error`,
 * so clients can branch without parsing the message.
 */
export interface Operation {
  /** op-<uuid> */
  id: string;
  type: OperationType;
  status: OperationStatus;
  /** The VM name (for warm_pool_create: the pool's name). */
  target: string;
  created_at: string;
  completed_at?: string;
  /** 0-100 */
  progress_percent: number;
  /** Only when completed; vm_create holds {vm: {name, state}}. */
  result?: Record<string, unknown>;
  /** Only when failed. */
  error?: string;
  /** Ours: the error code of a failed operation (PROVISIONING_ERROR, ...). */
  error_code?: string;
}

/**
 * GET /api/v2/admin/operations/{id} (spec 4.10; the shape is ours): the answer of
 * GET /api/v1/operations/{id} — the Operation plus `state`, equal to `status` — field for field,
 * plus `links.self`, this route's path.
 */
export interface AdminOperation extends Operation {
  state: OperationStatus;
  links: { self: string };
}

/** 202 envelope of create, restart and deploy-agent (spec part 2). */
export interface OperationAccepted {
  operation: Operation;
  vm: null;
  /** Ours: what the request asked for but did not get (an omitted ssh_key). */
  warnings?: string[];
}

/** 200 of start, stop and destroy. */
export interface VmLifecycleResult {
  vm: { name: string; state: string };
  message: string;
}

/** 200 of DELETE /api/v1/vms/{name} (spec 4.3: the delete is applied before the answer). */
export interface VmDeleteResult {
  deleted: boolean;
  name: string;
  disk_deleted: boolean;
}

// ---------------------------------------------------------------- container images (4.16)

export interface ContainerImage {
  ref: string;
  label: string;
  description: string;
  default?: boolean;
}

export interface ContainerImageList {
  images: ContainerImage[];
}
