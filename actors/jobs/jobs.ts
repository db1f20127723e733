/**
 * Stateless CPU jobs (checksums now; manifest parsing and key generation later) and the one
 * dispatch function that runs them: in a piscina worker (jobs.worker.ts) or, in inline mode, on
 * the main thread. Results cross the thread as values, never as thrown errors, so an SvcError's
 * code survives (piscina would pass only the message).
 */
import { createHash } from 'node:crypto';
import { SvcError, toWire, type WireError } from '../../src/core/errors.js';

/** Every job: its argument and its result. */
export interface JobTable {
  /** SHA-256 of the bytes, or of the string's UTF-8 encoding; lower-case hex. */
  sha256: { args: Uint8Array | string; result: string };
}
export type JobName = keyof JobTable;

/** What the pool sends to a worker. */
export interface JobTask {
  name: string;
  args: unknown;
}

/** What comes back. */
export type JobOutcome = { ok: true; value: unknown } | { ok: false; error: WireError };

type JobFn = (args: unknown) => unknown;

function sha256(args: unknown): string {
  if (typeof args === 'string') return createHash('sha256').update(args, 'utf8').digest('hex');
  if (args instanceof Uint8Array) return createHash('sha256').update(args).digest('hex');
  throw new SvcError('request.invalid', 'sha256 takes a Uint8Array or a string');
}

const jobs: Record<JobName, JobFn> = { sha256 };

/** True when `name` is a known job. */
export function isJobName(name: unknown): name is JobName {
  return typeof name === 'string' && Object.hasOwn(jobs, name);
}

/** Runs one task; never throws (unknown job → request.invalid; other failures → their wire error). */
export async function runJob(task: JobTask): Promise<JobOutcome> {
  try {
    if (!isJobName(task.name)) throw new SvcError('request.invalid', `unknown job ${String(task.name)}`, { job: String(task.name) });
    return { ok: true, value: await jobs[task.name](task.args) };
  } catch (err) {
    return { ok: false, error: toWire(err) };
  }
}
