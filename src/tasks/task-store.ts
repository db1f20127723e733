/**
 * The in-memory task table (spec part 1: v1 resources live in memory). It owns every TaskRecord,
 * routes every state change through the task's TaskLifecycle (task-state.ts, on the core
 * StateMachine), keeps svc_tasks_by_state and svc_task_outcomes_total, and gives each task an
 * AbortSignal that fires when the task is cancelled or otherwise ends (the orchestrator passes it
 * to clone, provisioning and the command).
 *
 * Listing (GET /api/v1/tasks): newest first (by submission; ties in submission order reversed),
 * filtered by a set of states, then paged by offset/limit; total_count counts every match.
 * Finished tasks are kept until more than `maxFinishedTasks` have finished; then the ones that
 * finished first are forgotten (GET → 404).
 */
import { SvcError } from '../core/errors.js';
import { parseIntParam } from '../http/body.js';
import type { TransitionLogger } from '../core/state-machine.js';
import type { Metrics } from '../observability/metrics.js';
import type { TaskList } from '../wire/tasks.js';
import type { TaskManifest } from './manifest.js';
import {
  failureStateFor,
  isTaskState,
  isTerminal,
  newTaskId,
  newTaskRecord,
  TASK_STATES,
  TaskLifecycle,
  type MoveOptions,
  type TaskProgress,
  type TaskRecord,
  type TaskState,
  type TaskStateEvent,
} from './task-state.js';

/** GET /api/v1/tasks paging (spec 8: limit default 50, offset default 0). */
export const TASK_LIST_DEFAULT_LIMIT = 50;
export const TASK_LIST_MAX_LIMIT = 1000;
/** Default number of finished tasks remembered. */
export const DEFAULT_MAX_FINISHED_TASKS = 10_000;

export interface TaskListQuery {
  /** Only these states; undefined = all. */
  readonly states?: ReadonlySet<TaskState>;
  readonly limit: number;
  readonly offset: number;
}

/** GET /api/v1/tasks (src/wire/tasks.ts). */
export type { TaskList };

/**
 * `state` as the spec sends it: comma-separated states (`running,completed`). Every element must
 * be a known state; an empty element is refused. 400 `request.invalid` names the bad value.
 */
export function parseStateFilter(text: string): ReadonlySet<TaskState> {
  const out = new Set<TaskState>();
  for (const part of text.split(',')) {
    const s = part.trim();
    if (!isTaskState(s)) {
      throw new SvcError(
        'request.invalid',
        `query parameter state: ${JSON.stringify(s.slice(0, 40))} is not a task state (one of ${TASK_STATES.join(', ')})`,
      );
    }
    out.add(s);
  }
  return out;
}

/** state, limit (1–1000, default 50) and offset (≥ 0, default 0) from a query string. */
export function parseTaskListQuery(query: URLSearchParams): TaskListQuery {
  const states = query.getAll('state');
  if (states.length > 1)
    throw new SvcError('request.invalid', 'query parameter state is given more than once (use a comma-separated list)');
  const limit = parseIntParam(query, 'limit', { min: 1, max: TASK_LIST_MAX_LIMIT, default: TASK_LIST_DEFAULT_LIMIT });
  const offset = parseIntParam(query, 'offset', { min: 0, default: 0 });
  const first = states[0];
  return first === undefined ? { limit, offset } : { states: parseStateFilter(first), limit, offset };
}

export interface TaskStoreOptions {
  /** Every state change (and each creation, with from null). */
  readonly onEvent?: (event: TaskStateEvent) => void;
  readonly metrics?: Pick<Metrics, 'tasksByState' | 'taskOutcomesTotal'>;
  /** Logs every task state move (info) and every move the table forbids (warn). */
  readonly logger?: TransitionLogger;
  readonly now?: () => Date;
  readonly newId?: () => string;
  /** Finished tasks remembered; default {@link DEFAULT_MAX_FINISHED_TASKS}. */
  readonly maxFinishedTasks?: number;
}

interface Entry {
  readonly record: TaskRecord;
  readonly life: TaskLifecycle;
  readonly manifest: TaskManifest;
  readonly abort: AbortController;
}

export type { MoveOptions };

function snapshot(r: TaskRecord): TaskRecord {
  return { ...r, progress: { ...r.progress } };
}

export class TaskStore {
  readonly #tasks = new Map<string, Entry>();
  /** Ids of finished tasks, oldest finish first (eviction order). */
  readonly #finished = new Set<string>();
  readonly #opts: TaskStoreOptions;
  readonly #maxFinished: number;

  constructor(opts: TaskStoreOptions = {}) {
    this.#opts = opts;
    this.#maxFinished = opts.maxFinishedTasks ?? DEFAULT_MAX_FINISHED_TASKS;
  }

  /** Register a pending task for a validated manifest; returns its record. */
  create(manifest: TaskManifest): TaskRecord {
    const id = (this.#opts.newId ?? newTaskId)();
    if (this.#tasks.has(id)) throw new Error(`duplicate task id ${id}`);
    const record = newTaskRecord(id, manifest.name, this.#now());
    const life = new TaskLifecycle(record, {
      emit: (ev) => this.#emit(ev),
      failureAction: manifest.lifecycle.failureAction,
      ...(this.#opts.logger !== undefined ? { logger: this.#opts.logger } : {}),
      ...(this.#opts.now !== undefined ? { now: this.#opts.now } : {}),
    });
    this.#tasks.set(id, { record, life, manifest, abort: new AbortController() });
    this.#opts.metrics?.tasksByState.inc({ state: 'pending' });
    this.#emit({
      task_id: id,
      name: record.name,
      from: null,
      to: 'pending',
      message: record.state_message,
      at: record.created_at,
      exit_code: null,
      error: null,
    });
    return snapshot(record);
  }

  /** A copy of the record, or undefined. */
  get(id: string): TaskRecord | undefined {
    const e = this.#tasks.get(id);
    return e === undefined ? undefined : snapshot(e.record);
  }

  /** A copy of the record; 404 `task.not_found` when unknown. */
  require(id: string): TaskRecord {
    return snapshot(this.#entry(id).record);
  }

  manifest(id: string): TaskManifest {
    return this.#entry(id).manifest;
  }

  /** Aborted (with the reason) when the task is cancelled or reaches any terminal state. */
  signal(id: string): AbortSignal {
    return this.#entry(id).abort.signal;
  }

  /** Move a task (see TaskLifecycle.transition()); throws TaskTransitionError on an illegal move. */
  transition(id: string, to: TaskState, message: string, opts: MoveOptions = {}): TaskRecord {
    const e = this.#entry(id);
    this.#move(e, to, message, opts);
    return snapshot(e.record);
  }

  /** Move only when the task is in one of `from`; false otherwise (e.g. it was cancelled meanwhile). */
  tryTransition(id: string, from: readonly TaskState[], to: TaskState, message: string, opts: MoveOptions = {}): boolean {
    const e = this.#tasks.get(id);
    return e !== undefined && this.#move(e, to, message, opts, from);
  }

  /**
   * Fail a task: failed_preserved when the manifest asks to preserve and the state allows it,
   * failed otherwise. Returns the state entered, or null when the task had already finished.
   */
  fail(id: string, message: string, opts: MoveOptions = {}): 'failed' | 'failed_preserved' | null {
    const e = this.#tasks.get(id);
    if (e === undefined || isTerminal(e.record.state)) return null;
    const to = failureStateFor(e.record.state, e.manifest.lifecycle.failureAction);
    this.#move(e, to, message, opts);
    return to;
  }

  /**
   * DELETE /api/v1/tasks/{id}: cancel a task that has not finished. 404 `task.not_found`;
   * 400 `task.not_cancellable` when it already finished. The task's signal aborts with the reason.
   */
  cancel(id: string, reason: string): TaskRecord {
    const e = this.#entry(id);
    if (isTerminal(e.record.state)) {
      throw new SvcError('task.not_cancellable', `task ${id} already finished (${e.record.state}); only unfinished tasks can be cancelled`);
    }
    const why = reason.trim() === '' ? 'cancelled by request' : `cancelled: ${reason.trim()}`;
    this.#move(e, 'cancelled', why, {});
    return snapshot(e.record);
  }

  /** Set where the task runs (after provisioning). */
  setVm(id: string, vm: { name: string; ip: string | null }): void {
    const r = this.#entry(id).record;
    r.vm_name = vm.name;
    r.vm_ip = vm.ip;
  }

  /** Merge progress counters (from the stream-json reader). */
  updateProgress(id: string, progress: Partial<TaskProgress>): void {
    const r = this.#tasks.get(id)?.record;
    if (r !== undefined) Object.assign(r.progress, progress);
  }

  /** Newest first, filtered and paged (see the file comment). */
  list(query: TaskListQuery): TaskList {
    const all = [...this.#tasks.values()];
    const tasks: TaskRecord[] = [];
    let total = 0;
    for (let i = all.length - 1; i >= 0; i--) {
      const r = (all[i] as Entry).record;
      if (query.states !== undefined && !query.states.has(r.state)) continue;
      if (total >= query.offset && tasks.length < query.limit) tasks.push(snapshot(r));
      total++;
    }
    return { tasks, total_count: total };
  }

  /** Tasks not in a terminal state (for /healthz/deep active_tasks). */
  activeCount(): number {
    return this.#tasks.size - this.#finished.size;
  }

  get size(): number {
    return this.#tasks.size;
  }

  #entry(id: string): Entry {
    const e = this.#tasks.get(id);
    if (e === undefined) throw new SvcError('task.not_found', `no task ${id.slice(0, 80)}`);
    return e;
  }

  /** Moves the task (guarded by `guard` when given: false when it is in none of them). */
  #move(e: Entry, to: TaskState, message: string, opts: MoveOptions, guard?: readonly TaskState[]): boolean {
    const from = e.life.state;
    if (guard === undefined) e.life.transition(to, message, opts);
    else if (!e.life.tryTransition(guard, to, message, opts)) return false;
    const m = this.#opts.metrics;
    m?.tasksByState.dec({ state: from });
    m?.tasksByState.inc({ state: to });
    if (to === 'completed') m?.taskOutcomesTotal.inc({ outcome: 'success' });
    if (to === 'failed' || to === 'failed_preserved') m?.taskOutcomesTotal.inc({ outcome: 'failure' });
    if (isTerminal(to)) {
      const reason = new Error(`task ${e.record.id} ${to}: ${e.record.state_message}`);
      reason.name = 'AbortError';
      e.abort.abort(reason);
      this.#finished.add(e.record.id);
      this.#evict();
    }
    return true;
  }

  #evict(): void {
    while (this.#finished.size > this.#maxFinished) {
      const oldest = this.#finished.values().next().value as string;
      this.#finished.delete(oldest);
      const e = this.#tasks.get(oldest);
      this.#tasks.delete(oldest);
      if (e !== undefined) this.#opts.metrics?.tasksByState.dec({ state: e.record.state });
    }
  }

  #emit(event: TaskStateEvent): void {
    this.#opts.onEvent?.(event);
  }

  #now(): Date {
    return (this.#opts.now ?? (() => new Date()))();
  }
}
