/**
 * What a feature needs from the job pool (actors/jobs/job-pool.ts): run one named, stateless CPU
 * job off the main thread. Features take a JobRunner, not the pool, so they neither import the
 * worker runtime nor care whether the job runs in a piscina thread or inline (SVC_ACTORS=inline,
 * unit tests without a pool).
 *
 * Jobs live in job modules (`*.jobs.ts`, loaded by the pool by URL); arguments and results must be
 * structured-cloneable. ArrayBuffers listed in `transfer` are moved to the job, not copied: the
 * caller's views of them are detached afterwards.
 */

/** Options of one job run. */
export interface JobRunOptions {
  /** Aborting rejects with the signal's reason (a queued job is dropped, a running one abandoned). */
  readonly signal?: AbortSignal;
  /** Buffers moved to the job instead of copied (inline they stay where they are). */
  readonly transfer?: readonly ArrayBuffer[];
}

export interface JobRunner {
  /**
   * Runs job `name` of a loaded job module with `args`. Rejects with the job's SvcError (code
   * kept across the thread), request.invalid for an unknown job, server.not_ready once stopping.
   */
  run(name: string, args: unknown, opts?: JobRunOptions): Promise<unknown>;
}

const kTransfer = Symbol('sandboxd.jobTransfer');
interface Transferring {
  readonly [kTransfer]: readonly ArrayBuffer[];
  readonly value: unknown;
}

/** What a job returns so that `buffers` move back to the caller's thread instead of being copied. */
export function transferring(value: unknown, buffers: readonly ArrayBuffer[]): unknown {
  const t: Transferring = { [kTransfer]: buffers, value };
  return t;
}

/** A job's result split into the value and the buffers to move (none unless it used transferring). */
export function transferOf(result: unknown): { value: unknown; transfer: readonly ArrayBuffer[] } {
  if (typeof result === 'object' && result !== null && kTransfer in result) {
    const t = result as Transferring;
    return { value: t.value, transfer: t[kTransfer] };
  }
  return { value: result, transfer: [] };
}
