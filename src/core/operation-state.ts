/**
 * The Operation resource (spec parts 2 and 3): its types, its status machine and its JSON shape.
 * It lives in src/core because both threads drive it: the VM operation-queue actor in a worker
 * shard (actors may use only src/util, src/core and src/observability) and main-thread code
 * through src/operations/, whose one OperationStore holds every operation.
 *
 * Status machine (STYLE point 8; the spec leaves pending → running open, this is our decision):
 *
 *   pending ──started──► running ──finished──► completed   (result set, progress 100)
 *      │                    │
 *      └──── cancelled ─────┴────── failed ──► failed      (error set)
 *
 * - pending: accepted and queued behind earlier work on the same VM; progress 0.
 * - running: its first step was handed to the hypervisor; progress moves 0 → 100 in steps.
 * - pending → failed: dropped before it ran (its queue actor was lost to a shard restart, or the
 *   server is stopping), or refused at once (a reprovision of an agent whose VM cannot take a
 *   deploy-agent: the POST still answers 202, and the operation says why).
 * - completed and failed are final.
 */
import type { ReprovisionAccepted } from '../wire/agents.js';
import type { Operation, OperationStatus, OperationType } from '../wire/vms.js';
import { StateMachine, transitionTableMarkdown, type TransitionLogger, type TransitionTable } from './state-machine.js';
import type { WireError } from './errors.js';

/**
 * The spec's operation types and statuses, its Operation object (as OperationJson) and the 202 of
 * a reprovision (as ReprovisionAcceptedJson): declared with the API's wire shapes (src/wire/vms.ts,
 * src/wire/agents.ts).
 */
export { OPERATION_STATUSES, OPERATION_TYPES } from '../wire/vms.js';
export type { Operation as OperationJson, OperationStatus, OperationType, ReprovisionAccepted as ReprovisionAcceptedJson };

/** Allowed moves; see the file comment. */
export const OPERATION_STATUS_TABLE: TransitionTable<OperationStatus> = {
  pending: ['running', 'failed'],
  running: ['completed', 'failed'],
  completed: [],
  failed: [],
};

/** Causes of the moves (the `cause` of transition()). */
export const OperationCause = {
  started: 'started',
  finished: 'finished',
  stepFailed: 'step_failed',
  cancelled: 'cancelled',
  refused: 'refused',
} as const;

/** The table as Markdown, for the README. */
export function operationStatusTableMarkdown(): string {
  return transitionTableMarkdown(OPERATION_STATUS_TABLE, {
    pending: {
      running: 'its turn in the VM queue came and its first step started',
      failed: 'dropped before it ran (queue actor lost, server stopping), or refused at once (a reprovision that cannot be queued)',
    },
    running: { completed: 'every step succeeded (result set, progress 100)', failed: 'a step failed (error set)' },
  });
}

export function isTerminal(status: OperationStatus): boolean {
  return status === 'completed' || status === 'failed';
}

/** An operation as the runtime keeps it; `seq` grows with every change, so stale copies lose. */
export interface OperationSnapshot<T extends string = OperationType> {
  readonly id: string;
  readonly type: T;
  readonly target: string;
  readonly status: OperationStatus;
  readonly createdAtMs: number;
  readonly completedAtMs: number | null;
  readonly progressPercent: number;
  readonly result: Record<string, unknown> | null;
  readonly error: WireError | null;
  readonly seq: number;
}

/** The spec's JSON for a snapshot: completed_at only when finished, result only on completion, error only on failure. */
export function operationJson(s: OperationSnapshot): Operation {
  const out: Operation = {
    id: s.id,
    type: s.type,
    status: s.status,
    target: s.target,
    created_at: new Date(s.createdAtMs).toISOString(),
    progress_percent: s.progressPercent,
  };
  if (s.completedAtMs !== null) out.completed_at = new Date(s.completedAtMs).toISOString();
  if (s.status === 'completed' && s.result !== null) out.result = s.result;
  if (s.status === 'failed' && s.error !== null) {
    out.error = s.error.message;
    out.error_code = s.error.code;
  }
  return out;
}

/**
 * One operation's progress through the machine (`T`: the type vocabulary; the VM queue actor
 * also runs its internal start/stop/destroy jobs through it). Progress only grows, stays within 0-100, and
 * is 100 exactly when completed; a failed operation keeps the progress it had reached.
 */
export class OperationProgress<T extends string = OperationType> {
  readonly id: string;
  readonly type: T;
  readonly target: string;
  readonly createdAtMs: number;
  readonly #machine: StateMachine<OperationStatus>;
  readonly #now: () => number;
  #progress = 0;
  #completedAtMs: number | null = null;
  #result: Record<string, unknown> | null = null;
  #error: WireError | null = null;
  #seq = 1;

  constructor(opts: { id: string; type: T; target: string; logger?: TransitionLogger; now?: () => number }) {
    this.id = opts.id;
    this.type = opts.type;
    this.target = opts.target;
    this.#now = opts.now ?? Date.now;
    this.createdAtMs = this.#now();
    this.#machine = new StateMachine<OperationStatus>({
      name: 'operation',
      initial: 'pending',
      table: OPERATION_STATUS_TABLE,
      ...(opts.logger !== undefined ? { logger: opts.logger } : {}),
      logFields: { operation: opts.id, type: opts.type, vm: opts.target },
      now: this.#now,
    });
  }

  get status(): OperationStatus {
    return this.#machine.state;
  }

  /** pending → running. Returns whether it moved. */
  start(): boolean {
    return this.#bump(this.#machine.transition(['pending'], 'running', OperationCause.started));
  }

  /** Raises progress (clamped to 0-99 while running; never lowered). Returns whether it changed. */
  progress(percent: number): boolean {
    if (this.status !== 'running') return false;
    const p = Math.max(0, Math.min(99, Math.floor(percent)));
    if (p <= this.#progress) return false;
    this.#progress = p;
    this.#seq++;
    return true;
  }

  /** running → completed with `result`; progress 100. */
  complete(result: Record<string, unknown>): boolean {
    if (!this.#machine.transition(['running'], 'completed', OperationCause.finished)) return false;
    this.#progress = 100;
    this.#result = result;
    this.#completedAtMs = this.#now();
    return this.#bump(true);
  }

  /** pending|running → failed with `error`. */
  fail(error: WireError, cause: string = OperationCause.stepFailed): boolean {
    if (!this.#machine.transition(['pending', 'running'], 'failed', cause)) return false;
    this.#error = error;
    this.#completedAtMs = this.#now();
    return this.#bump(true);
  }

  snapshot(): OperationSnapshot<T> {
    return {
      id: this.id,
      type: this.type,
      target: this.target,
      status: this.status,
      createdAtMs: this.createdAtMs,
      completedAtMs: this.#completedAtMs,
      progressPercent: this.#progress,
      result: this.#result,
      error: this.#error,
      seq: this.#seq,
    };
  }

  #bump(moved: boolean): boolean {
    if (moved) this.#seq++;
    return moved;
  }
}
