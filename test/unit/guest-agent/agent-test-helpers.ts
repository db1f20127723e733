/** Shared helpers of the agent tests. */
import { readdirSync, readFileSync } from 'node:fs';

/** True while pid runs (a zombie — dead, not yet reaped by its new parent — counts as gone). */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** The live (not zombie) processes of process group `pgid`, with their command names, from /proc. */
export function groupMembers(pgid: number): { pid: number; comm: string }[] {
  const out: { pid: number; comm: string }[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const [state, , pgrp] = stat.slice(close + 2).split(' ');
      if (Number(pgrp) === pgid && state !== 'Z') out.push({ pid: Number(name), comm: stat.slice(stat.indexOf('(') + 1, close) });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
