/**
 * The VM feature's job module for the job pool (actors/jobs; loaded by URL): finding a local VM's
 * processes. Stopping a test-driver VM's agent looks through every process on the host for the
 * VM's environment mark (local-vm-processes.ts), twice or more per stop: an open, fstat, read and
 * close of /proc/<pid>/environ for each of the host's processes, and the parsing of each. On a
 * host running a thousand processes that was the largest single cost of a VM stop on the main
 * thread (flamegraphs/vm-ops.md); as a job it runs in a pool thread (inline under
 * SVC_ACTORS=inline, with the same code), and the main thread only signals and reaps the few
 * processes it finds.
 */
import type { JobRunner } from '../util/job-runner.js';
import { findVmProcesses, type ProcessFinder, type VmProcess } from './local-vm-processes.js';

/** This module, for JobPool.start({ jobModules }). */
export const VM_JOBS_MODULE = new URL(import.meta.url);

/** The jobs, by name (loaded by the pool). */
export const jobs = {
  'vms.findProcesses': (args: unknown): Promise<VmProcess[]> => {
    const { vmDirs, exclude } = args as { vmDirs: string[]; exclude: number[] };
    return findVmProcesses(vmDirs, new Set(exclude));
  },
};

/** findVmProcesses run as a job on `runner`. */
export function processFinderOn(runner: JobRunner): ProcessFinder {
  return async (vmDirs, exclude = new Set()) => {
    if (vmDirs.length === 0) return [];
    return (await runner.run('vms.findProcesses', { vmDirs: [...vmDirs], exclude: [...exclude] })) as VmProcess[];
  };
}
