/**
 * piscina worker entry for stateless CPU jobs (loaded by URL from job-pool.ts, never imported):
 * loads the job modules named in the pool's workerData once, then runs one task per call.
 */
import { move, transferableSymbol, valueSymbol, workerData } from 'piscina';
import { loadJobs, runJob, type JobOutcome, type JobTask } from './jobs.js';

const table = await loadJobs((workerData as { modules: string[] }).modules);

export default async function dispatch(task: JobTask): Promise<JobOutcome> {
  const { outcome, transfer } = await runJob(table, task);
  if (transfer.length === 0) return outcome;
  // an object carrying piscina's transferable symbols is posted with its buffers moved, not copied
  return move({ [transferableSymbol]: transfer, [valueSymbol]: outcome }) as unknown as JobOutcome;
}
