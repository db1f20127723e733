/**
 * The client's view of the public HTTP API (spec part 2, part 4). The wire shapes (response and
 * request bodies) are declared once, in src/wire, which both the server and the client import:
 * this module re-exports them, so the client, the CLI and the dashboard keep importing from here,
 * and the dashboard bundle and the CLI still depend on nothing server-side (src/wire is a leaf).
 * What is declared below is the client's own: query parameters of its methods and the parsed
 * events of the streams it follows.
 *
 * Times: `*_at` strings are ISO 8601 UTC; `connected_at`, `last_heartbeat`, `timestamp_ms` are
 * Unix milliseconds; `created_at_secs` is Unix seconds.
 */
import type { AgentOutputChunk, AgentOutputError } from '../wire/agents.js';
import type { TaskState } from '../wire/tasks.js';

export * from '../wire/health.js';
export * from '../wire/agents.js';
export * from '../wire/vms.js';
export * from '../wire/events.js';
export * from '../wire/tasks.js';
export * from '../wire/credentials.js';
export * from '../wire/sessions.js';
export * from '../wire/activity.js';
export * from '../wire/checkpoints.js';
export * from '../wire/profiles.js';
export * from '../wire/celld.js';
export * from '../wire/fleet.js';
export * from '../wire/a2a.js';

// ---------------------------------------------------------------- events (4.5, part 6)

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

// ---------------------------------------------------------------- activity (4.12)

/** The scope of an activity read (the X-Svc-* headers): host, instance and agent may be `*` (every value). */
export interface ActivityReadScope {
  tenant_id: string;
  host_id: string;
  instance_id: string;
  agent_id: string;
}

/** Filters of GET /api/v2/activity/events (all exact match; since/until RFC 3339 or epoch ms, on occurred_at). */
export interface ActivityQuery {
  event_name?: string;
  collector_id?: string;
  session_id?: string;
  mission_id?: string;
  task_id?: string;
  tool_call_id?: string;
  command_id?: string;
  process_id?: string;
  trace_id?: string;
  since?: string;
  until?: string;
  /** 1-5000, default 100. */
  limit?: number;
  /** The previous page's next_cursor. */
  cursor?: string;
}

// ---------------------------------------------------------------- tasks (4.6)

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

export type AgentOutputEvent =
  | { type: 'agent_output' | 'agent_output.replay'; chunk: AgentOutputChunk; id: string | undefined }
  | { type: 'agent_output.error'; error: AgentOutputError; id: string | undefined };
