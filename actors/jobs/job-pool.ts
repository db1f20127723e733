/**
 * JobPool: a piscina pool for stateless CPU jobs (actors/jobs/jobs.ts). Mode 'inline' runs the
 * same dispatch function on the main thread (benchmark baseline, debugging).
 */
import { Piscina } from 'piscina';
import { SvcError, fromWire } from '../../src/core/errors.js';
import { runJob, type JobName, type JobOutcome, type JobTable, type JobTask } from './jobs.js';

const kJobsWorkerUrl = new URL('./jobs.worker.js', import.meta.url);
/** Default bound of stop() (ms): running jobs may finish within it, then threads are destroyed. */
export const kDefaultJobStopDeadlineMs = 5_000;

export interface JobPoolOptions {
  /** Worker threads (≥ 1) in 'workers' mode; ignored inline. */
  threads: number;
  mode: 'workers' | 'inline';
}

export interface JobRunOptions {
  /** Aborting rejects with the signal's reason (a queued job is dropped, a running one abandoned). */
  signal?: AbortSignal;
}

function unwrap(outcome: JobOutcome): unknown {
  if (outcome.ok) return outcome.value;
  throw fromWire(outcome.error);
}

export class JobPool {
  readonly mode: 'workers' | 'inline';
  readonly #pool: Piscina<JobTask, JobOutcome> | undefined;
  #stopping: Promise<void> | undefined;

  /** Starts the pool (threads are created up front). Rejects RangeError for threads < 1. */
  static start(opts: JobPoolOptions): Promise<JobPool> {
    if (opts.mode !== 'inline' && (!Number.isInteger(opts.threads) || opts.threads < 1)) {
      return Promise.reject(new RangeError(`threads must be an integer ≥ 1, got ${opts.threads}`));
    }
    return Promise.resolve(new JobPool(opts));
  }

  private constructor(opts: JobPoolOptions) {
    this.mode = opts.mode;
    if (opts.mode === 'workers') {
      this.#pool = new Piscina<JobTask, JobOutcome>({
        filename: kJobsWorkerUrl.href,
        name: 'default',
        minThreads: opts.threads,
        maxThreads: opts.threads,
      });
    }
  }

  /**
   * Runs job `name`. Rejects with the job's SvcError (code kept), request.invalid for an unknown
   * job or bad args, server.not_ready after stop(), or the signal's reason on abort.
   */
  async run<N extends JobName>(name: N, args: JobTable[N]['args'], opts: JobRunOptions = {}): Promise<JobTable[N]['result']> {
    const { signal } = opts;
    signal?.throwIfAborted();
    if (this.#stopping !== undefined) throw new SvcError('server.not_ready', 'the job pool is stopping');
    const task: JobTask = { name, args };
    if (this.#pool === undefined) return unwrap(await runJob(task)) as JobTable[N]['result'];
    try {
      return unwrap(await this.#pool.run(task, { signal: signal ?? null })) as JobTable[N]['result'];
    } catch (err) {
      if (signal?.aborted === true) throw signal.reason;
      throw err;
    }
  }

  /** Threads in the pool (0 inline). */
  get threads(): number {
    return this.#pool?.threads.length ?? 0;
  }

  /** Lets running jobs finish within opts.deadlineMs (default 5 s), then ends the threads. Idempotent. */
  stop(opts: { deadlineMs?: number } = {}): Promise<void> {
    this.#stopping ??= (async () => {
      const pool = this.#pool;
      if (pool === undefined) return;
      const deadlineMs = opts.deadlineMs ?? kDefaultJobStopDeadlineMs;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), deadlineMs);
        timer.unref();
      });
      const closed = pool.close().then(() => false, () => false);
      const late = await Promise.race([closed, timedOut]);
      clearTimeout(timer);
      if (late) await pool.destroy();
    })();
    return this.#stopping;
  }
}
