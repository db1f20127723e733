/** piscina worker entry for stateless CPU jobs (loaded by URL from job-pool.ts, never imported). */
import { runJob, type JobOutcome, type JobTask } from './jobs.js';

export default function dispatch(task: JobTask): Promise<JobOutcome> {
  return runJob(task);
}
