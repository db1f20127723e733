/**
 * Process groups: every command leads its own group (spawn detached / forkpty's setsid), so "kill"
 * reaches its children and grandchildren too. The kernel never hands out a pid that is still in
 * use as a process group id, so signalling -pgid after the leader exited is safe while any
 * member lives.
 */
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';

const SIGNALS = constants.signals as Readonly<Record<string, number>>;

/** Signal number of a name ("SIGTERM" → 15); undefined for unknown names. */
export function signalNumber(name: string): number | undefined {
  return SIGNALS[name];
}

/** Signal name of a number (15 → "SIGTERM"); undefined for unknown numbers. */
export function signalName(signo: number): NodeJS.Signals | undefined {
  for (const [name, n] of Object.entries(SIGNALS)) if (n === signo) return name as NodeJS.Signals;
  return undefined;
}

/** Exit code convention: the status, or 128 + signal number when killed by a signal. */
export function exitCodeOf(code: number | null, signal: NodeJS.Signals | number | null): number {
  if (signal !== null && signal !== 0) {
    const n = typeof signal === 'number' ? signal : (signalNumber(signal) ?? 0);
    return 128 + n;
  }
  return code ?? -1;
}

/**
 * Sends a signal to every process of group pgid (= the leader's pid). False when the group no
 * longer exists.
 *
 * node-pty returns the child's pid right after fork, before the child's setsid() made the group:
 * a signal sent in that window finds no group. Then the signal goes to the leader itself, if it
 * is still our child (checked in /proc, so a recycled pid is never hit); it has not exec'd yet, so
 * it has no children to miss.
 */
export function signalGroup(pgid: number, signal: NodeJS.Signals | number): boolean {
  if (!(pgid > 1)) return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
  if (parentOf(pgid) !== process.pid) return false;
  try {
    process.kill(pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Parent pid of pid from /proc (undefined when it is gone or /proc is missing). */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid ...": comm may contain spaces and parentheses, so split after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(ppid) ? ppid : undefined;
  } catch {
    return undefined;
  }
}

/** True while any process of group pgid exists (EPERM counts: it exists, we may not signal it). */
export function groupAlive(pgid: number): boolean {
  if (!(pgid > 1)) return false;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True while process pid exists. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * SIGTERM to the group, then SIGKILL to whatever of it is left after graceMs (also members that
 * outlived the leader). Resolves once `exited` settled, or 5 s after SIGKILL at the latest.
 */
export async function terminateGroup(pgid: number, exited: Promise<unknown>, graceMs: number): Promise<void> {
  signalGroup(pgid, 'SIGTERM');
  const done = exited.then(
    () => true,
    () => true,
  );
  if (!(await raceTimeout(done, graceMs)) || groupAlive(pgid)) signalGroup(pgid, 'SIGKILL');
  await raceTimeout(done, 5000);
}

/** True if p settled within ms. */
function raceTimeout(p: Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<boolean>((res) => {
    timer = setTimeout(() => res(false), ms);
    timer.unref();
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
