/**
 * The HTTP API's wire shapes, declared once: agents (spec 4.2, part 2) and agent output (4.7).
 * Times: `connected_at`, `last_heartbeat` and `timestamp_ms` are Unix milliseconds.
 * A leaf: imports nothing outside src/wire.
 */

// ---------------------------------------------------------------- agents (4.2)

/** The spec's agent statuses, in its order (transitions: src/core/agent-status.ts). */
export const AGENT_STATUSES = ['Starting', 'Ready', 'Busy', 'Error', 'ShuttingDown', 'Stale', 'Disconnected'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];

/** The spec's Agent.metrics. */
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

/** The spec's Agent.system_info. */
export interface AgentSystemInfo {
  os: string;
  kernel: string;
  cpu_cores: number;
  memory_bytes: number;
  disk_bytes: number;
}

/** The spec's Agent (part 2), exactly: GET /api/v1/agents lists these. */
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

/**
 * POST /api/v1/agents/{id}/reprovision (202): the id of an ordinary vm_create operation (a
 * deploy-agent of the agent's VM).
 */
export interface ReprovisionAccepted {
  /** A vm_create operation: poll GET /api/v1/operations/{id}. */
  operation_id: string;
  status: 'queued';
}

// ---------------------------------------------------------------- agent output (4.7, part 2)

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
