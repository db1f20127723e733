/**
 * Finds processes a test run left behind. The runner puts a marker variable with a fresh id in its
 * environment; every process the tests start inherits it — including daemons that leave their
 * parent, such as a tmux server — so after the run any live process that still carries the
 * marker is a leftover. Linux only (/proc); elsewhere it finds nothing.
 */
import { readdirSync, readFileSync } from 'node:fs';

export const kRunMarker = 'SANDBOXD_TEST_RUN';

export interface Leftover {
  pid: number;
  cmdline: string;
  /** The test file that started it (SANDBOXD_TEST_FILE, set per file by test-process.ts), if known. */
  file: string | undefined;
}

function environOf(pid: number): Map<string, string> | undefined {
  try {
    const env = new Map<string, string>();
    for (const kv of readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0')) {
      const eq = kv.indexOf('=');
      if (eq > 0) env.set(kv.slice(0, eq), kv.slice(eq + 1));
    }
    return env;
  } catch {
    return undefined; // gone, or not ours to read
  }
}

function isZombie(pid: number): boolean {
  try {
    return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'latin1'));
  } catch {
    return true;
  }
}

/** Live processes (not zombies, not `exclude`) whose environment carries `kRunMarker=runId`. */
export function findLeftovers(runId: string, exclude: ReadonlySet<number> = new Set()): Leftover[] {
  let pids: number[];
  try {
    pids = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number);
  } catch {
    return [];
  }
  const out: Leftover[] = [];
  for (const pid of pids) {
    if (pid === process.pid || exclude.has(pid)) continue;
    const env = environOf(pid);
    if (env?.get(kRunMarker) !== runId || isZombie(pid)) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim();
      out.push({ pid, cmdline, file: env.get('SANDBOXD_TEST_FILE') });
    } catch {
      // it exited between the two reads
    }
  }
  return out;
}

/**
 * Waits up to `graceMs` for the marked processes to go (a tmux server exits a moment after its
 * last session), then kills what is left and returns it.
 */
export async function reapLeftovers(runId: string, exclude: ReadonlySet<number>, graceMs: number): Promise<Leftover[]> {
  const deadline = Date.now() + graceMs;
  let found = findLeftovers(runId, exclude);
  while (found.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    found = findLeftovers(runId, exclude);
  }
  for (const p of found) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return found;
}
