/**
 * Task lifecycle (spec part 3 "Task"): the states, the one table of allowed moves, the Task
 * record of spec part 2, and TaskLifecycle, whose guarded `transition()` on the core
 * StateMachine (src/core/state-machine.ts) every move goes through.
 *
 *   pending ─► staging ─► provisioning ─► ready ─► running ─► completing ─► completed
 *
 *   pending, staging, provisioning, ready, running, completing ──► failed
 *   running, completing (failure_action: preserve)             ──► failed_preserved
 *   any non-terminal state ──DELETE /api/v1/tasks/{id}──────────► cancelled
 *
 * pending → failed is ours (the spec shows no failure moves): lifecycle.timeout runs from
 * submission, so a task still waiting for an orchestrator slot when it fires fails there.
 * failed_preserved is reachable only from running or completing, and only when the manifest says
 * `lifecycle.failure_action: preserve` (a VM exists to keep from running on). Terminal states
 * (completed, failed, failed_preserved, cancelled) have no way out.
 */
import { randomUUID } from 'node:crypto';
import { StateMachine, type TransitionCounts, type TransitionLogger, type TransitionTable } from '../core/state-machine.js';
import { TASK_STATES, TERMINAL_TASK_STATES, type Task as TaskRecord, type TaskProgress, type TaskState } from '../wire/tasks.js';
import type { FailureAction } from './manifest-rules.js';

/**
 * The spec's states (in lifecycle order, and the terminal ones), the Task record of spec part 2
 * (Task, named TaskRecord here) and its progress: declared with the API's wire shapes (src/wire/tasks.ts).
 */
export { TASK_STATES, TERMINAL_TASK_STATES };
export type { TaskRecord, TaskProgress, TaskState };

/** Allowed moves: state → states it may move to. */
export const TASK_TRANSITIONS: TransitionTable<TaskState> = {
  pending: ['staging', 'failed', 'cancelled'],
  staging: ['provisioning', 'failed', 'cancelled'],
  provisioning: ['ready', 'failed', 'cancelled'],
  ready: ['running', 'failed', 'cancelled'],
  running: ['completing', 'failed', 'failed_preserved', 'cancelled'],
  completing: ['completed', 'failed', 'failed_preserved', 'cancelled'],
  completed: [],
  failed: [],
  failed_preserved: [],
  cancelled: [],
};

/** What triggers each move (the README's table is generated from this and TASK_TRANSITIONS). */
export const TASK_TRANSITION_TRIGGERS: Partial<Record<TaskState, Partial<Record<TaskState, string>>>> = {
  pending: {
    staging: 'the orchestrator picks the task up',
    failed: 'lifecycle.timeout while waiting, or the orchestrator stops',
    cancelled: 'DELETE /api/v1/tasks/{id}',
  },
  staging: {
    provisioning: 'workspace prepared (shallow git clone at the branch)',
    failed: 'clone or workspace error',
    cancelled: 'DELETE',
  },
  provisioning: { ready: 'a VM is running and its agent is connected', failed: 'no VM or agent within the deadline', cancelled: 'DELETE' },
  ready: { running: 'the coding agent command starts', failed: 'the command cannot be started', cancelled: 'DELETE' },
  running: {
    completing: 'the command exits 0',
    failed: 'non-zero exit, lost agent or lifecycle.timeout (failure_action destroy)',
    failed_preserved: 'the same, with failure_action preserve: the VM is kept',
    cancelled: 'DELETE (process group killed, agent freed)',
  },
  completing: {
    completed: 'artifacts collected',
    failed: 'artifact collection failed or lifecycle.timeout (destroy)',
    failed_preserved: 'the same, with failure_action preserve',
    cancelled: 'DELETE',
  },
};

/** A new task id (matches TASK_ID_RE in src/core/ids.ts). */
export function newTaskId(): string {
  return `task-${randomUUID()}`;
}

export function isTerminal(state: TaskState): boolean {
  return TERMINAL_TASK_STATES.includes(state);
}

export function isTaskState(value: string): value is TaskState {
  return (TASK_STATES as readonly string[]).includes(value);
}

/** True when the table allows `from → to`. */
export function canTransition(from: TaskState, to: TaskState): boolean {
  return TASK_TRANSITIONS[from].includes(to);
}

/** A fresh pending record. */
export function newTaskRecord(id: string, name: string, now: Date): TaskRecord {
  const at = now.toISOString();
  return {
    id,
    name,
    state: 'pending',
    state_message: 'task accepted',
    created_at: at,
    started_at: null,
    state_changed_at: at,
    vm_name: null,
    vm_ip: null,
    exit_code: null,
    error: null,
    progress: { output_bytes: 0, tool_calls: 0, current_tool: null, last_activity_at: at },
  };
}

/** A completed move, handed to the event callback (event store, metrics, task log stream). */
export interface TaskStateEvent {
  readonly task_id: string;
  readonly name: string;
  /** null for the creation of the task (to pending). */
  readonly from: TaskState | null;
  readonly to: TaskState;
  readonly message: string;
  /** ISO 8601. */
  readonly at: string;
  readonly exit_code: number | null;
  readonly error: string | null;
}

/** What one task's lifecycle needs besides its record. */
export interface TaskLifecycleOptions {
  /** Called after the record changed. Exceptions propagate to the caller of transition(). */
  readonly emit: (event: TaskStateEvent) => void;
  /** The task's manifest setting; failed_preserved is refused unless it is `preserve`. */
  readonly failureAction: FailureAction;
  /** Logs every move (info) and every move the table forbids (warn). */
  readonly logger?: TransitionLogger;
  readonly now?: () => Date;
}

/** Extra fields a move may set. */
export interface MoveOptions {
  /** Set exit_code (the agent command's exit status). */
  readonly exitCode?: number | null;
  /** Set error; on a move to failed/failed_preserved it defaults to the message. */
  readonly error?: string | null;
}

/** An illegal move: a programming error in the caller, never a client's fault. */
export class TaskTransitionError extends Error {
  readonly from: TaskState;
  readonly to: TaskState;
  constructor(taskId: string, from: TaskState, to: TaskState, why: string) {
    super(`task ${taskId}: ${from} -> ${to} is not allowed (${why})`);
    this.name = 'TaskTransitionError';
    this.from = from;
    this.to = to;
  }
}

/** Longest state_message/error kept (characters); longer text is cut with an ellipsis. */
export const MAX_STATE_MESSAGE_CHARS = 1024;

function clip(text: string): string {
  return text.length > MAX_STATE_MESSAGE_CHARS ? `${text.slice(0, MAX_STATE_MESSAGE_CHARS - 1)}…` : text;
}

/**
 * The `cause` of each move, by the state it enters (a short word for the core machine's log
 * lines and counts; the state_message says more).
 */
export const TASK_CAUSES: Readonly<Record<TaskState, string>> = {
  pending: 'submitted',
  staging: 'picked_up',
  provisioning: 'workspace_prepared',
  ready: 'vm_ready',
  running: 'command_started',
  completing: 'command_exited',
  completed: 'artifacts_collected',
  failed: 'failed',
  failed_preserved: 'failed_preserved',
  cancelled: 'cancel_requested',
};

/**
 * One task's lifecycle: its record, moved only through a core StateMachine (STYLE point 8), so
 * every move is guarded by TASK_TRANSITIONS, logged and counted like every other lifecycle.
 */
export class TaskLifecycle {
  /** The live record (callers hand out copies). */
  readonly record: TaskRecord;
  readonly #machine: StateMachine<TaskState>;
  readonly #opts: TaskLifecycleOptions;

  constructor(record: TaskRecord, opts: TaskLifecycleOptions) {
    this.record = record;
    this.#opts = opts;
    this.#machine = new StateMachine<TaskState>({
      name: 'task',
      initial: record.state,
      table: TASK_TRANSITIONS,
      logFields: { task: record.id },
      ...(opts.logger !== undefined ? { logger: opts.logger } : {}),
    });
  }

  get state(): TaskState {
    return this.#machine.state;
  }

  /** The machine's counters (moves, skipped, rejected). */
  counts(): TransitionCounts {
    return this.#machine.counts();
  }

  /**
   * Move to `to`, recording state_message, state_changed_at (and started_at on the move to
   * running, error on a move to a failed state), then emit the event. Throws TaskTransitionError
   * when the table forbids the move (the machine also logs it at warn and counts it rejected),
   * when `to` is the current state, or for failed_preserved when the manifest does not ask to
   * preserve.
   */
  transition(to: TaskState, message: string, move: MoveOptions = {}): TaskStateEvent {
    const task = this.record;
    const from = this.state;
    if (to === 'failed_preserved' && canTransition(from, to) && this.#opts.failureAction !== 'preserve') {
      throw new TaskTransitionError(task.id, from, to, 'the manifest does not set failure_action: preserve');
    }
    if (
      !this.#machine.transition([from], to, TASK_CAUSES[to], {
        message: clip(message),
        ...(task.vm_name !== null ? { vm: task.vm_name } : {}),
      })
    ) {
      throw new TaskTransitionError(
        task.id,
        from,
        to,
        from === to ? `already ${to}` : isTerminal(from) ? `${from} is terminal` : 'not in the table',
      );
    }
    const at = (this.#opts.now ?? (() => new Date()))().toISOString();
    task.state = to;
    task.state_message = clip(message);
    task.state_changed_at = at;
    if (to === 'running' && task.started_at === null) task.started_at = at;
    if (move.exitCode !== undefined) task.exit_code = move.exitCode;
    if (move.error !== undefined) task.error = move.error === null ? null : clip(move.error);
    else if (to === 'failed' || to === 'failed_preserved') task.error = clip(message);
    const event: TaskStateEvent = {
      task_id: task.id,
      name: task.name,
      from,
      to,
      message: task.state_message,
      at,
      exit_code: task.exit_code,
      error: task.error,
    };
    this.#opts.emit(event);
    return event;
  }

  /**
   * transition() guarded by the caller's expectation: moves only when the task is in one of
   * `from` (returns false otherwise, counted as skipped: e.g. a step finishing after the task was
   * cancelled). A move the table forbids from a state in `from` still throws.
   */
  tryTransition(from: readonly TaskState[], to: TaskState, message: string, move: MoveOptions = {}): boolean {
    if (!from.includes(this.state)) return this.#machine.transition(from, to, TASK_CAUSES[to]);
    this.transition(to, message, move);
    return true;
  }
}

/** The failure state for a task failing now: failed_preserved when allowed and asked for, else failed. */
export function failureStateFor(state: TaskState, failureAction: FailureAction): 'failed' | 'failed_preserved' {
  return failureAction === 'preserve' && canTransition(state, 'failed_preserved') ? 'failed_preserved' : 'failed';
}
