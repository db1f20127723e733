/**
 * CPU time per thread of this process, from /proc/self/task/<tid>/schedstat (nanoseconds on a
 * CPU, Linux): what a scenario uses to report CPU per byte per thread, a figure other sessions'
 * load on the shared cores barely moves (unlike wall-clock rates). Empty where /proc is missing.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** tid → [ns on a CPU so far, timeslices run so far (each one a wake-up or a preemption)]. */
export type ThreadCpu = Map<number, [number, number]>;

export function threadCpu(): ThreadCpu {
  const out: ThreadCpu = new Map();
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const [ns, , slices] = readFileSync(`/proc/self/task/${tid}/schedstat`, 'latin1').split(' ');
      out.set(Number(tid), [Number(ns), Number(slices)]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/**
 * CPU ms between two readings: the main thread, the busiest other thread, and the rest (V8's
 * helpers, libuv); and how many times the main thread and the busiest one were put on a CPU
 * (wake-ups from a wait, and returns after a preemption).
 */
export interface CpuSplit {
  mainMs: number;
  busiestMs: number;
  restMs: number;
  mainSlices: number;
  busiestSlices: number;
}

export function cpuBetween(before: ThreadCpu, after: ThreadCpu, mainTid = process.pid): CpuSplit {
  let mainNs = 0;
  let mainSlices = 0;
  let busiestNs = 0;
  let busiestSlices = 0;
  let otherNs = 0;
  for (const [tid, [ns, slices]] of after) {
    const [ns0, slices0] = before.get(tid) ?? [0, 0];
    const d = ns - ns0;
    if (tid === mainTid) {
      mainNs = d;
      mainSlices = slices - slices0;
    } else {
      otherNs += d;
      if (d > busiestNs) {
        busiestNs = d;
        busiestSlices = slices - slices0;
      }
    }
  }
  return { mainMs: mainNs / 1e6, busiestMs: busiestNs / 1e6, restMs: (otherNs - busiestNs) / 1e6, mainSlices, busiestSlices };
}
