/**
 * The job table and the one dispatch function that runs a job: in a piscina worker
 * (jobs.worker.ts) or, inline, on the main thread. Jobs are stateless functions exported by job
 * modules (beside the feature they serve, loaded by URL like actor modules), so the
 * pool knows no feature and features never import the pool's worker side.
 *
 * A job module exports `jobs: Record<name, JobFn>`; names are `<feature>.<verb>` and unique across
 * the loaded modules. A job returns its result, or `transferring(result, buffers)` (from
 * src/util/job-runner.ts) to move ArrayBuffers back instead of copying them. Job modules are named
 * `*-jobs.ts` (src/tasks/task-jobs.ts, src/identity/identity-jobs.ts).
 *
 * Results cross the thread as values, never as thrown
 * errors, so an SvcError's code survives (piscina would pass only the message), and any other
 * error comes back as a plain Error with its name and message: the caller sees what it would have
 * seen had the job run inline.
 */
import { SvcError, fromWire, toWire, type WireError } from '../../src/core/errors.js';
import { errorMessage } from '../../src/util/error-message.js';
import { transferOf } from '../../src/util/job-runner.js';

/** One job: structured-cloneable arguments in, a structured-cloneable result (or a promise of one) out. */
export type JobFn = (args: unknown) => unknown;

/** What a job module exports. */
export interface JobModule {
  readonly jobs: Readonly<Record<string, JobFn>>;
}

/** What the pool sends to a worker. */
export interface JobTask {
  name: string;
  args: unknown;
}

/** What comes back: a value, an SvcError as its wire form, or any other error's name and message. */
export type JobOutcome =
  { ok: true; value: unknown } | { ok: false; error: WireError } | { ok: false; thrown: { name: string; message: string } };

/** The jobs of `modules`, by name. Rejects with a TypeError naming a module without `jobs` or a name defined twice. */
export async function loadJobs(modules: readonly string[]): Promise<ReadonlyMap<string, JobFn>> {
  const table = new Map<string, JobFn>();
  for (const href of modules) {
    const mod = (await import(href)) as Partial<JobModule>;
    if (typeof mod.jobs !== 'object' || mod.jobs === null) throw new TypeError(`job module ${href} exports no jobs`);
    for (const [name, fn] of Object.entries(mod.jobs)) {
      if (table.has(name)) throw new TypeError(`job ${name} is defined twice (again in ${href})`);
      table.set(name, fn);
    }
  }
  return table;
}

/**
 * Runs one task; never rejects (unknown job → request.invalid; a failure → its wire error).
 * `transfer` lists the buffers the result asked to move.
 */
export async function runJob(
  table: ReadonlyMap<string, JobFn>,
  task: JobTask,
): Promise<{ outcome: JobOutcome; transfer: readonly ArrayBuffer[] }> {
  try {
    const fn = typeof task.name === 'string' ? table.get(task.name) : undefined;
    if (fn === undefined) throw new SvcError('request.invalid', `unknown job ${String(task.name)}`, { job: String(task.name) });
    const { value, transfer } = transferOf(await fn(task.args));
    return { outcome: { ok: true, value }, transfer };
  } catch (err) {
    if (err instanceof SvcError) return { outcome: { ok: false, error: toWire(err) }, transfer: [] };
    return {
      outcome: { ok: false, thrown: { name: err instanceof Error ? err.name : 'Error', message: errorMessage(err) } },
      transfer: [],
    };
  }
}

/** The job's value, or its failure rethrown as the caller would have seen it inline. */
export function unwrapOutcome(outcome: JobOutcome): unknown {
  if (outcome.ok) return outcome.value;
  if ('error' in outcome) throw fromWire(outcome.error);
  const err = new Error(outcome.thrown.message);
  err.name = outcome.thrown.name;
  throw err;
}
