/**
 * JobPool: a piscina pool for stateless CPU jobs, so checksums, archive reading and certificate
 * signing do not stall the main thread's sockets. It runs the jobs of the job modules it was
 * started with (see jobs.ts); features reach it through the JobRunner interface
 * (src/util/job-runner.ts). Mode 'inline' runs the same jobs on the main thread (SVC_ACTORS=inline:
 * the benchmark baseline and a debugging aid).
 */
import { Piscina } from 'piscina';
import { SvcError } from '../../src/core/errors.js';
import type { JobRunner, JobRunOptions } from '../../src/util/job-runner.js';
import { loadJobs, runJob, unwrapOutcome, type JobFn, type JobOutcome, type JobTask } from './jobs.js';

const kJobsWorkerUrl = new URL('./jobs.worker.js', import.meta.url);
/** Default bound of stop() (ms): running jobs may finish within it, then threads are destroyed. */
export const kDefaultJobStopDeadlineMs = 5_000;

export interface JobPoolOptions {
  /** Worker threads (≥ 1) in 'workers' mode; ignored inline. */
  threads: number;
  mode: 'workers' | 'inline';
  /** Job modules (`*.jobs.js` URLs) whose jobs the pool runs; each thread imports all of them. */
  jobModules: readonly URL[];
  /** Where a thread that dies outside any job is reported (piscina replaces it). Default: nowhere. */
  logger?: { error(obj: object, msg?: string): void };
}

export class JobPool implements JobRunner {
  readonly mode: 'workers' | 'inline';
  readonly #pool: Piscina<JobTask, JobOutcome> | undefined;
  readonly #inline: ReadonlyMap<string, JobFn> | undefined;
  #stopping: Promise<void> | undefined;

  /**
   * Starts the pool (threads are created up front and import the job modules before their first
   * job). Rejects RangeError for threads < 1, TypeError for a job module without jobs or a job name
   * defined twice.
   */
  static async start(opts: JobPoolOptions): Promise<JobPool> {
    if (opts.mode !== 'inline' && (!Number.isInteger(opts.threads) || opts.threads < 1)) {
      throw new RangeError(`threads must be an integer ≥ 1, got ${opts.threads}`);
    }
    const modules = opts.jobModules.map((u) => u.href);
    // Loading them here too checks the modules before any thread starts (and is the inline table).
    const table = await loadJobs(modules);
    if (opts.mode === 'inline') return new JobPool(opts.mode, undefined, table);
    const pool = new Piscina<JobTask, JobOutcome>({
      filename: kJobsWorkerUrl.href,
      name: 'default',
      minThreads: opts.threads,
      maxThreads: opts.threads,
      workerData: { modules },
    });
    // without a listener, piscina's 'error' (a thread lost while idle) would end the process
    pool.on('error', (err: unknown) => opts.logger?.error({ err }, 'a job pool thread failed; piscina starts another'));
    return new JobPool(opts.mode, pool, undefined);
  }

  private constructor(
    mode: 'workers' | 'inline',
    pool: Piscina<JobTask, JobOutcome> | undefined,
    inline: ReadonlyMap<string, JobFn> | undefined,
  ) {
    this.mode = mode;
    this.#pool = pool;
    this.#inline = inline;
  }

  /** See JobRunner.run; `opts.signal` aborted rejects with its reason. */
  async run(name: string, args: unknown, opts: JobRunOptions = {}): Promise<unknown> {
    const { signal } = opts;
    signal?.throwIfAborted();
    if (this.#stopping !== undefined) throw new SvcError('server.not_ready', 'the job pool is stopping');
    const task: JobTask = { name, args };
    if (this.#pool === undefined) return unwrapOutcome((await runJob(this.#inline ?? new Map(), task)).outcome);
    try {
      return unwrapOutcome(await this.#pool.run(task, { signal: signal ?? null, transferList: [...(opts.transfer ?? [])] }));
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
      const closed = pool.close().then(
        () => false,
        () => false,
      );
      const late = await Promise.race([closed, timedOut]);
      clearTimeout(timer);
      if (late) await pool.destroy();
    })();
    return this.#stopping;
  }
}
