/**
 * The HTTP API's wire shapes, declared once: tasks (spec 4.6, part 2). Times: `*_at` strings
 * are ISO 8601 UTC. A leaf: imports nothing outside src/wire.
 */

/** The spec's states, in lifecycle order (the table of moves: src/tasks/task-state.ts). */
export const TASK_STATES = [
  'pending',
  'staging',
  'provisioning',
  'ready',
  'running',
  'completing',
  'completed',
  'failed',
  'failed_preserved',
  'cancelled',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

/** States a task never leaves. */
export const TERMINAL_TASK_STATES: readonly TaskState[] = ['completed', 'failed', 'failed_preserved', 'cancelled'];

/** Live progress read from the coding agent's stream-json output (spec 2). */
export interface TaskProgress {
  output_bytes: number;
  tool_calls: number;
  current_tool: string | null;
  /** ISO 8601; the submission time until the agent produces output. */
  last_activity_at: string;
}

/** The Task record of spec part 2, as the API returns it. */
export interface Task {
  /** task-<uuid> */
  id: string;
  name: string;
  state: TaskState;
  state_message: string;
  created_at: string;
  /** When the coding agent started (the move to running); null before. */
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

/** 202 of POST /api/v1/tasks. */
export interface TaskSubmitResult {
  task_id: string;
  accepted: boolean;
  error: string | null;
}

/** 200 of DELETE /api/v1/tasks/{id}. */
export interface TaskCancelResult {
  success: boolean;
  error: string | null;
}

export interface TaskArtifact {
  /** Relative to the task's outbox; the key of the download route. */
  name: string;
  path: string;
  size_bytes: number;
  /** From the extension. */
  content_type: string;
  /** sha256 hex (lower case), may be empty. */
  checksum: string;
}

export interface TaskArtifactList {
  artifacts: TaskArtifact[];
}
