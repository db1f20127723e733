/**
 * The lifecycle of a scoped-storage write review (STYLE point 8: on the project's state-machine
 * type). Every inbox or outbox write (PUT or DELETE through the scoped API) starts `pending`.
 *
 *   pending ──approved, write landed──► applied
 *      ├─────rejected──────────────────► rejected
 *      └─────approved, write refused───► failed   (quota, the object changed, …: error says why)
 */
import { StateMachine, transitionTableMarkdown, type TransitionLogger, type TransitionTable } from '../core/state-machine.js';
import { STORAGE_REVIEW_STATES, type StorageReviewState } from '../wire/storage.js';

export const REVIEW_STATES = STORAGE_REVIEW_STATES;
export type ReviewState = StorageReviewState;

export const REVIEW_TABLE: TransitionTable<ReviewState> = {
  pending: ['applied', 'rejected', 'failed'],
  applied: [],
  rejected: [],
  failed: [],
};

/** Moves a review from `current` to `to` when the table allows it; returns whether it moved. */
export function moveReview(id: string, current: ReviewState, to: ReviewState, cause: string, logger?: TransitionLogger): boolean {
  const m = new StateMachine<ReviewState>({
    name: 'storage review',
    initial: current,
    table: REVIEW_TABLE,
    ...(logger !== undefined && { logger }),
    logFields: { review: id },
  });
  return m.transition(['pending'], to, cause);
}

/** README's review table. */
export function reviewTableMarkdown(): string {
  return transitionTableMarkdown(REVIEW_TABLE, {
    pending: { applied: 'approve (the write landed)', rejected: 'reject', failed: 'approve (the write was refused at apply)' },
  });
}
