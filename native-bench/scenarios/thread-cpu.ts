/**
 * CPU time per thread of this process, from /proc/self/task/<tid>/schedstat (nanoseconds on a
 * CPU, Linux): what a scenario uses to report CPU per byte per thread, a figure other sessions'
 * load on the shared cores barely moves (unlike wall-clock rates). Empty where /proc is missing.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** tid → ns on a CPU so far. */
export type ThreadCpu = Map<number, number>;

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
      out.set(Number(tid), Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'latin1').split(' ')[0]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** CPU ms between two readings: the main thread, the busiest other thread, and the rest (V8's helpers, libuv). */
export interface CpuSplit {
  mainMs: number;
  busiestMs: number;
  restMs: number;
}

export function cpuBetween(before: ThreadCpu, after: ThreadCpu, mainTid = process.pid): CpuSplit {
  let mainNs = 0;
  let busiestNs = 0;
  let otherNs = 0;
  for (const [tid, ns] of after) {
    const d = ns - (before.get(tid) ?? 0);
    if (tid === mainTid) mainNs = d;
    else {
      otherNs += d;
      busiestNs = Math.max(busiestNs, d);
    }
  }
  return { mainMs: mainNs / 1e6, busiestMs: busiestNs / 1e6, restMs: (otherNs - busiestNs) / 1e6 };
}
