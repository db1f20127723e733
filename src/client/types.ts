/**
 * Response and request shapes of the public HTTP API, with the spec's field names (part 2, part 4).
 * The client is the contract's reader, so these are written out here rather than imported from
 * the server's modules: the dashboard bundle and the CLI depend on nothing server-side.
 *
 * Times: `*_at` strings are ISO 8601 UTC; `connected_at`, `last_heartbeat`, `timestamp_ms` are
 * Unix milliseconds; `created_at_secs` is Unix seconds.
 */

// ---------------------------------------------------------------- health (4.1)

/** GET /healthz, /api/v1/health. */
export interface HealthStatus {
  status: string;
}

/** GET /readyz (200 when ready, 503 otherwise; both carry this body). */
export interface Readiness {
  ready: boolean;
  reason: string;
}

/** GET /healthz/deep: the spec's fields plus ours (ready, uws, actors, degraded_reasons). */
export interface DeepHealth {
  /** `ok`, or `degraded` with reasons. */
  status: string;
  uptime_seconds: number;
  agent_count: number;
  active_tasks: number;
  ready: boolean;
  uws: { native: boolean; detail: string };
  actors: { mode: string; shards: number; restarts: number };
  degraded_reasons: string[];
}

// ---------------------------------------------------------------- agents (4.2)

export type AgentStatus = 'Starting' | 'Ready' | 'Busy' | 'Error' | 'ShuttingDown' | 'Stale' | 'Disconnected';

export interface AgentMetrics {
  cpu_percent: number;
  memory_used_bytes: number;
  memory_total_bytes: number;
  disk_used_bytes: number;
  disk_total_bytes: number;
  /** 1, 5 and 15 minute load averages. */
  load_avg: [number, number, number];
  uptime_seconds: number;
}

export interface AgentSystemInfo {
  os: string;
  kernel: string;
  cpu_cores: number;
  memory_bytes: number;
  disk_bytes: number;
}

export interface Agent {
  id: string;
  hostname: string;
  ip_address: string;
  status: AgentStatus;
  /** Unix ms. */
  connected_at: number;
  /** Unix ms. */
  last_heartbeat: number;
  metrics?: AgentMetrics;
  system_info?: AgentSystemInfo;
}

export interface AgentList {
  agents: Agent[];
}

/** POST /api/v1/agents/{id}/reprovision (202). */
export interface ReprovisionAccepted {
  /** A vm_create operation: poll GET /api/v1/operations/{id}. */
  operation_id: string;
  status: 'queued';
}

// ---------------------------------------------------------------- VMs and operations (4.3, 4.4)

export type VmState = 'running' | 'stopped' | 'paused' | 'shutdown' | 'crashed' | 'suspended' | 'unknown';

export interface Vm {
  name: string;
  state: VmState;
  uuid: string;
  vcpus: number;
  memory_mb: number;
  /** '' when unknown. */
  ip_address: string;
  uptime_seconds: number | null;
}

/** GET /api/v1/vms/{name}: the VM plus its agent (and our host, profile, disk_gb, accelerator). */
export interface VmDetail extends Vm {
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
  /** svc-dev (default) or basic. */
  profile?: string;
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
}

/** POST /api/v1/vms/{name}/restart body. */
export interface VmRestartRequest {
  /** graceful (default, ACPI shutdown) or hard. */
  mode?: 'graceful' | 'hard';
  /** Seconds to wait for a graceful shutdown before forcing; default 60. */
  timeout_seconds?: number;
}

export type OperationType = 'vm_create' | 'vm_delete' | 'vm_restart';
export type OperationStatus = 'pending' | 'running' | 'completed' | 'failed';

export interface Operation {
  /** op-<uuid> */
  id: string;
  type: OperationType;
  status: OperationStatus;
  /** The VM name. */
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

/** 202 envelope of create, restart and deploy-agent. */
export interface OperationAccepted {
  operation: Operation;
  vm: null;
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

// ---------------------------------------------------------------- events (4.5, part 6)

export interface EventRecord {
  /** Ours: the monotonic cursor (poll or resume with since=id). */
  id: number;
  event_type: string;
  vm_name: string;
  timestamp: string;
  details: Record<string, unknown>;
  agent_id: string;
  trace_id: string | null;
}

export interface EventPage {
  events: EventRecord[];
  total_count: number;
  last_event_id: number;
}

/** Filters of GET /api/v1/events (all optional). */
export interface EventFilters {
  /** Only events with id > since. */
  since?: number;
  /** Exact type, or a prefix ending in `*` (`agent.*`). */
  event_type?: string;
  agent_id?: string;
  vm_name?: string;
  /** 1-5000, default 100 (the newest matches, oldest first). */
  limit?: number;
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

// ---------------------------------------------------------------- tasks (4.6)

export type TaskState =
  | 'pending'
  | 'staging'
  | 'provisioning'
  | 'ready'
  | 'running'
  | 'completing'
  | 'completed'
  | 'failed'
  | 'failed_preserved'
  | 'cancelled';

/** States a task never leaves. */
export const TERMINAL_TASK_STATES: readonly TaskState[] = ['completed', 'failed', 'failed_preserved', 'cancelled'];

export interface TaskProgress {
  output_bytes: number;
  tool_calls: number;
  current_tool: string | null;
  last_activity_at: string;
}

export interface Task {
  /** task-<uuid> */
  id: string;
  name: string;
  state: TaskState;
  state_message: string;
  created_at: string;
  started_at: string | null;
  state_changed_at: string;
  vm_name: string | null;
  vm_ip: string | null;
  exit_code: number | null;
  error: string | null;
  progress: TaskProgress;
}

export interface TaskList {
  tasks: Task[];
  total_count: number;
}

/** A minimal manifest object (spec 2); the server's schema accepts a fuller form. */
export interface TaskManifestObject {
  name?: string;
  repository?: { url: string; branch?: string };
  prompt?: string;
  [key: string]: unknown;
}

/** POST /api/v1/tasks body: exactly one of the two. */
export type TaskSubmitRequest = { manifest_yaml: string } | { manifest: TaskManifestObject };

export interface TaskSubmitResult {
  task_id: string;
  accepted: boolean;
  error: string | null;
}

export interface TaskCancelResult {
  success: boolean;
  error: string | null;
}

export interface TaskArtifact {
  /** Relative to the task's outbox; the key of the download route. */
  name: string;
  path: string;
  size_bytes: number;
  content_type: string;
  /** sha256 hex, may be empty. */
  checksum: string;
}

export interface TaskArtifactList {
  artifacts: TaskArtifact[];
}

export interface TaskListQuery {
  /** One state, a comma-separated list, or several. */
  state?: string | readonly TaskState[];
  /** Default 50. */
  limit?: number;
  /** Default 0. */
  offset?: number;
}

/** One event of the task log stream: stdout, stderr, event (structured JSON), completed (exit code), error (message). */
export type TaskLogEvent =
  | { type: 'stdout' | 'stderr'; text: string; id: string | undefined }
  | { type: 'event'; data: unknown; id: string | undefined }
  | { type: 'completed'; exitCode: number | null; id: string | undefined }
  | { type: 'error'; message: string; id: string | undefined };

// ---------------------------------------------------------------- sessions (4.2, part 2)

export type SessionRole = 'controller' | 'observer';

/** Ours: a session's lifecycle state (closed sessions leave the list). */
export type SessionState = 'starting' | 'running' | 'detached' | 'closed';

/** POST /api/v1/agents/{id}/sessions body (all optional). */
export interface SessionCreateRequest {
  /** Default bash. */
  command?: string;
  /** Default terminal-<hex>. */
  session_name?: string;
  /** tmux only. */
  session_backend?: string;
  /** managed only. */
  session_class?: string;
}

export interface SessionAccessFields {
  ws_endpoint: string;
  /** The spec's join message: it always asks for the controller role. */
  join_message: { type: 'join_session'; session_id: string; role: 'controller' };
  pty_ws_url: string;
  pty_ws_subprotocol: string;
  orchestrator_observer_url: string;
  orchestrator_controller_url: string;
  default_role: SessionRole;
  controller_policy: string;
  session_backend: string;
  session_class: string;
  chat_source: 'stream-json' | 'none';
  chat_stream_url: string | null;
}

export interface SessionCreated extends SessionAccessFields {
  session_id: string;
  instance_id: string;
  command_id: string;
  session_name: string;
  supported_session_backends: string[];
  supported_session_classes: string[];
  observe_supported: boolean;
  drive_supported: boolean;
  reattach_supported: boolean;
}

export interface SessionMembership {
  controllers: string[];
  observers: string[];
  attachment_count: number;
}

export interface SessionLiveness {
  agent_connected: boolean;
  has_screen: boolean;
  replay_newest_seq: number;
  max_client_lag: number;
}

export interface SessionEntry extends SessionAccessFields {
  session_id: string;
  /** Ours: the agent's instance id. */
  instance_id: string;
  command_id: string;
  session_name: string;
  session_type: 'interactive';
  command: string;
  created_at_secs: number;
  has_screen: boolean;
  /** Ours: starting, running, detached. */
  state: SessionState;
  membership: SessionMembership;
  liveness: SessionLiveness;
}

export interface SessionList {
  agent_id: string;
  sessions: SessionEntry[];
}

export type SessionSignal = 'TERM' | 'KILL' | 'INT' | 'HUP';

/** 200 of DELETE …/sessions/{session}: only a verified kill answers. */
export interface SessionKillResult {
  killed: true;
}

// ---------------------------------------------------------------- HITL (4.16; our shape, the spec shows none)

/** A pending human-in-the-loop request detected in a session's output. */
export interface HitlRequest {
  id: string;
  session_id: string;
  agent_id: string;
  command_id: string;
  kind: 'sudo' | 'password' | 'confirm' | 'press_enter';
  /** The prompt text seen on the terminal. */
  prompt: string;
  /** RFC 3339. */
  created_at: string;
}

/** GET /api/v1/hitl: pending requests, oldest first. */
export interface HitlList {
  requests: HitlRequest[];
}

/** POST /api/v1/hitl/{id}/respond. */
export interface HitlRespondResult {
  resolved: boolean;
}

// ---------------------------------------------------------------- agent output (4.7, part 2)

export interface AgentOutputQuery {
  agent_id?: string;
  command_id?: string;
  stream?: 'stdout' | 'stderr' | 'log';
  /** Replay the buffered output of command_id first (command_id required). */
  replay?: boolean;
  /** Replayed chunks, at most 1000. */
  limit?: number;
}

/** Data object of agent_output and agent_output.replay events. */
export interface AgentOutputChunk {
  /** svc.agent_output.v1 */
  schema: string;
  event_type: string;
  agent_id: string;
  command_id: string;
  stream: 'stdout' | 'stderr' | 'log';
  timestamp_ms: number;
  data_base64: string;
  text: string;
}

/** Data object of agent_output.error (output_gap, slow_subscriber, stream_end). */
export interface AgentOutputError {
  schema: string;
  /** agent_output.error */
  event_type: string;
  code: string;
  message: string;
  [key: string]: unknown;
}

export type AgentOutputEvent =
  | { type: 'agent_output' | 'agent_output.replay'; chunk: AgentOutputChunk; id: string | undefined }
  | { type: 'agent_output.error'; error: AgentOutputError; id: string | undefined };
