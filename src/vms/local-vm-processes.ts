/**
 * Every process of a local VM (test driver), found and ended.
 *
 * A local VM's processes are its sandbox-agent (sandboxd's child), the agent's commands and PTYs,
 * the VM's private tmux server, and the shells and programs in its panes. The tmux server
 * daemonizes (its parent is init, not the agent), and a pane's programs may leave the pane's
 * session and process group (setsid, nohup), so neither parentage nor sessions find them all. The
 * environment does: the local agent starts with `SANDBOXD_LOCAL_VM=<vm dir>`, the agent hands its
 * environment to every command, and tmux hands the server's (inherited from the client the agent
 * ran) to every pane. A process is this VM's when its /proc/<pid>/environ carries that exact
 * assignment; nothing else is ever signalled.
 *
 * Ending: SIGTERM to all, up to `graceMs` for them to go, SIGKILL to the rest; then look again (a
 * dying shell may have forked) until none is left, at most {@link kEndRounds} times. A signal is
 * sent only while /proc/<pid>/stat still shows the start time seen when the process was found, so
 * a recycled pid is never hit. Zombies count as gone (their parent reaps them). Linux only: without
 * /proc nothing is found.
 *
 * The VM's tmux socket directory (TMUX_TMPDIR) is `<vm dir>/tmux`, so VMs, and sandboxd instances
 * with different state dirs, never share a tmux server. A socket path must fit in sun_path (107
 * bytes); when `<vm dir>/tmux/tmux-<uid>/sandboxd` would not, a directory under the system temp
 * dir named by a hash of the VM dir is used instead, derived the same way when it is reaped.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The environment variable that marks a local VM's processes; its value is the VM's directory. */
export const LOCAL_VM_ENV = 'SANDBOXD_LOCAL_VM';
/** Rounds of find → TERM → wait → KILL before survivors are reported. */
const kEndRounds = 3;
/** Longest tmux socket path used inside a VM dir, bytes (sun_path holds 107 and a NUL). */
const kMaxSocketPathBytes = 100;
const kPollMs = 50;

export interface VmProcess {
  readonly pid: number;
  /** Start time in clock ticks since boot (field 22 of /proc/<pid>/stat): the process's identity. */
  readonly startTicks: number;
  /** The VM dir its mark names. */
  readonly vmDir: string;
  /** Its command line, arguments joined by spaces (for logs). */
  readonly cmdline: string;
}

export interface EndedVmProcesses {
  /** Processes that were signalled and are gone. */
  readonly ended: VmProcess[];
  /** Processes still alive after every round (unkillable, e.g. in uninterruptible sleep). */
  readonly survivors: VmProcess[];
}

/** The tmux socket directory of the VM at `vmDir` (see the file comment). */
export function localTmuxDir(vmDir: string): string {
  const inside = join(vmDir, 'tmux');
  const socket = join(inside, `tmux-${process.getuid?.() ?? 0}`, 'sandboxd');
  if (Buffer.byteLength(socket) <= kMaxSocketPathBytes) return inside;
  return join(tmpdir(), `sbx-tmux-${createHash('sha256').update(vmDir).digest('hex').slice(0, 12)}`);
}

/** The environment additions that make a process one of the VM's and give it the VM's tmux server. */
export function localVmEnv(vmDir: string): { [LOCAL_VM_ENV]: string; TMUX_TMPDIR: string } {
  return { [LOCAL_VM_ENV]: vmDir, TMUX_TMPDIR: localTmuxDir(vmDir) };
}

/** How processes are looked up: findVmProcesses, here or on the job pool (vm-jobs.ts). */
export type ProcessFinder = (vmDirs: readonly string[], exclude?: ReadonlySet<number>) => Promise<VmProcess[]>;

/** Live processes (zombies excluded) marked with one of `vmDirs`, except `exclude`d pids and this process. */
export async function findVmProcesses(vmDirs: readonly string[], exclude: ReadonlySet<number> = new Set()): Promise<VmProcess[]> {
  if (vmDirs.length === 0) return [];
  const marks = new Map(vmDirs.map((d) => [`${LOCAL_VM_ENV}=${d}`, d]));
  const pids = (await readdir('/proc').catch(() => [] as string[])).filter((d) => /^\d+$/.test(d)).map(Number);
  const found = await Promise.all(
    pids.map(async (pid): Promise<VmProcess | null> => {
      if (pid === process.pid || exclude.has(pid)) return null;
      const environ = await readFile(`/proc/${pid}/environ`, 'latin1').catch(() => '');
      let vmDir: string | undefined;
      for (const kv of environ.split('\0')) {
        vmDir = marks.get(kv);
        if (vmDir !== undefined) break;
      }
      if (vmDir === undefined) return null;
      const stat = await statOf(pid);
      if (stat === null || stat.zombie) return null;
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'latin1').catch(() => '');
      return { pid, startTicks: stat.startTicks, vmDir, cmdline: cmdline.split('\0').join(' ').trim() };
    }),
  );
  return found.filter((p): p is VmProcess => p !== null);
}

/**
 * Ends every process marked with one of `vmDirs` (see the file comment). `exclude`: pids left to
 * someone else (the running agent, which sandboxd stops and reaps itself). `find`: how to look
 * (default findVmProcesses on this thread).
 */
export async function endVmProcesses(
  vmDirs: readonly string[],
  opts: { graceMs: number; exclude?: ReadonlySet<number>; find?: ProcessFinder },
): Promise<EndedVmProcesses> {
  const find = opts.find ?? findVmProcesses;
  const ended: VmProcess[] = [];
  let left: VmProcess[] = [];
  for (let round = 0; round < kEndRounds; round++) {
    const found = await find(vmDirs, opts.exclude);
    if (found.length === 0) return { ended, survivors: [] };
    // Later rounds only catch what was forked meanwhile: no second grace for it.
    const graceMs = round === 0 ? opts.graceMs : 0;
    for (const p of found) await signalIfSame(p, graceMs > 0 ? 'SIGTERM' : 'SIGKILL');
    left = await waitGone(found, graceMs);
    for (const p of left) await signalIfSame(p, 'SIGKILL');
    left = await waitGone(left, 1000);
    ended.push(...found.filter((p) => !left.includes(p)));
  }
  return { ended, survivors: left };
}

/** Removes the VM's tmux socket directory when it lives outside the VM dir (nothing else would). */
export async function removeOutsideTmuxDir(vmDir: string): Promise<void> {
  const dir = localTmuxDir(vmDir);
  if (!dir.startsWith(`${vmDir}/`)) await rm(dir, { recursive: true, force: true });
}

/** True while `p` (the same process, not a recycled pid) is alive and not a zombie. */
async function isAlive(p: VmProcess): Promise<boolean> {
  const s = await statOf(p.pid);
  return s !== null && !s.zombie && s.startTicks === p.startTicks;
}

async function signalIfSame(p: VmProcess, sig: NodeJS.Signals): Promise<void> {
  if (!(await isAlive(p))) return;
  try {
    process.kill(p.pid, sig);
  } catch {
    // gone in between
  }
}

/** Waits up to `timeoutMs` for the processes to go; resolves with those still alive. */
async function waitGone(procs: readonly VmProcess[], timeoutMs: number): Promise<VmProcess[]> {
  const deadline = Date.now() + timeoutMs;
  let left = [...procs];
  for (;;) {
    const alive = await Promise.all(left.map((p) => isAlive(p)));
    left = left.filter((_, i) => alive[i]);
    if (left.length === 0 || Date.now() >= deadline) return left;
    await new Promise((r) => setTimeout(r, kPollMs));
  }
}

/** State and start time from /proc/<pid>/stat (the command name may hold spaces and parentheses). */
async function statOf(pid: number): Promise<{ zombie: boolean; startTicks: number } | null> {
  const text = await readFile(`/proc/${pid}/stat`, 'latin1').catch(() => null);
  if (text === null) return null;
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); field 22 (starttime) is fields[19].
  const startTicks = Number(fields[19]);
  if (!Number.isSafeInteger(startTicks)) return null;
  return { zombie: fields[0] === 'Z' || fields[0] === 'X', startTicks };
}
