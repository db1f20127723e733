/**
 * Local `sandbox-agent` processes: on the libvirt test driver a VM runs no guest, so sandboxd
 * plays the guest's part and runs the VM's agent as a child process (DESIGN.md "each test VM
 * gets a local agent process"):
 *
 *   node <dist>/src/bin/sandbox-agent.js --server HOST:PORT --certs <vm>/certs --agent-id <vm>
 *        --instance-id <uuid> --profile P --work-dir <vm>/work [--labels k=v,...]
 *        [--bootstrap-token-file <vm>/bootstrap/material.json] [--exit-with stdin]
 *
 * The last only while staged bootstrap material exists: the agent enrolls with it. Only the
 * file's path is on the command line, never the token.
 *
 * cwd <vm>/work; stdout and stderr appended to <vm>/agent.log; environment sandboxd's own plus
 * the VM's mark and private tmux directory (local-vm-processes.ts). The process is this VM's
 * "guest service": it is started when the VM starts and stopped (SIGTERM, then SIGKILL after
 * `stopGraceMs`, and always reaped) when the VM stops, is destroyed or deleted. A process that
 * dies on its own while its VM runs is restarted like a systemd Restart=on-failure unit: after
 * 1 s, doubling to 30 s, the delay reset once it has run a minute; exit codes 0 (the server's
 * ShutdownSignal) and 2 (bad configuration) are not restarted.
 *
 * The VM's other processes (its tmux server, the shells and programs in it, whatever the agent's
 * commands left) behave as in a guest: they survive an agent restart (deploy-agent, a crash), and
 * end when the VM powers off — `stop` ends them all, as a stopped guest would. At `stopAll`
 * (sandboxd stopping) they end too when the VM ends with sandboxd (`endsWithServer`: the
 * in-process test driver forgets its VMs when the process exits, so nothing could ever reattach
 * them); a VM on a daemon-served test driver outlives sandboxd and keeps them for its next agent.
 *
 * With an sshd supervisor (SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH set), each VM's sshd
 * (local-sshd.ts) is started with its agent and stopped when the VM stops.
 *
 * The agent of a VM that ends with sandboxd gets `--exit-with stdin` and a pipe as its stdin that
 * only sandboxd holds: when sandboxd ends in any way, SIGKILL included, the pipe closes and the
 * agent stops by itself (before, a killed sandboxd's agents kept reconnecting to nothing until a
 * sandboxd started on the same state dir ended them; a benchmark's temporary one never does).
 *
 * Leftovers: the pid is written to <vm>/agent.pid. If sandboxd died without stopping its agents,
 * the next start of that VM's agent finds the pid, checks /proc/<pid>/cmdline really is this
 * VM's sandbox-agent, and stops it first; `reapLeftovers` (at sandboxd's start) ends everything
 * a dead sandboxd left of VMs that no longer run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { formatAddress, type ListenAddress } from '../config/parsers.js';
import type { LocalSshdSupervisor } from './local-sshd.js';
import {
  endVmProcesses,
  localTmuxDir,
  localVmEnv,
  removeOutsideTmuxDir,
  type EndedVmProcesses,
  type ProcessFinder,
} from './local-vm-processes.js';

/** Default path of the agent entry point: the sibling build output of this module. */
export const DEFAULT_AGENT_BIN = fileURLToPath(new URL('../bin/sandbox-agent.js', import.meta.url));
/** agent.log is rotated (once, to agent.log.1) when larger than this at a start, bytes. */
export const AGENT_LOG_ROTATE_BYTES = 16 * 1024 * 1024;

export interface LocalAgentSpec {
  readonly vm: string;
  /** The VM's directory: the mark of its processes (local-vm-processes.ts). */
  readonly vmDir: string;
  /** The VM ends when sandboxd does (in-process test driver): `stopAll` ends all its processes. */
  readonly endsWithServer: boolean;
  readonly instanceId: string;
  readonly profile: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** Added to the agent's environment (its commands inherit it): the VM's loadout environment. */
  readonly env?: Readonly<Record<string, string>>;
  readonly certsDir: string;
  /**
   * Staged bootstrap material: while this file exists at a (re)start, the agent gets
   * --bootstrap-token-file (it enrolls and writes certsDir itself); once it is consumed, --certs alone.
   */
  readonly bootstrapTokenFile?: string;
  readonly workDir: string;
  readonly logPath: string;
  readonly pidPath: string;
}

export interface LocalAgentInfo {
  readonly vm: string;
  readonly pid: number;
  /** The full command line (node path first). */
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly logPath: string;
  /** Unix ms of the current process's start. */
  readonly startedAtMs: number;
  readonly running: boolean;
  /** Exit code or signal of the last exit, null while it runs. */
  readonly lastExit: { code: number | null; signal: string | null } | null;
  /** Restarts after crashes since `start`. */
  readonly restarts: number;
}

export interface LocalAgentSupervisorOptions {
  /** sandboxd's gRPC listener as the agent dials it (0.0.0.0 / :: become loopback). */
  server: ListenAddress;
  /** Default DEFAULT_AGENT_BIN. */
  agentBin?: string;
  /** Default process.execPath. */
  nodePath?: string;
  /** SIGTERM → SIGKILL delay, ms. Default 5000. */
  stopGraceMs?: number;
  /** Default true. */
  restartOnCrash?: boolean;
  /** How a stopping VM's processes are found (default findVmProcesses on the main thread; vm-service hands the job pool's). */
  findProcesses?: ProcessFinder;
  logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** Each VM's sshd (SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH set): started with its agent, stopped with the VM. */
  sshd?: LocalSshdSupervisor;
}

interface Entry {
  spec: LocalAgentSpec;
  child: ChildProcess;
  argv: string[];
  startedAtMs: number;
  exited: Promise<void>;
  lastExit: LocalAgentInfo['lastExit'];
  restarts: number;
  stopping: boolean;
  restartTimer: NodeJS.Timeout | null;
}

const MAX_RESTART_DELAY_MS = 30_000;

export class LocalAgentSupervisor {
  readonly #opts: LocalAgentSupervisorOptions;
  readonly #entries = new Map<string, Entry>();
  /** Per-VM chain: start and stop of one VM never interleave. */
  readonly #locks = new Map<string, Promise<unknown>>();
  #closed = false;

  constructor(opts: LocalAgentSupervisorOptions) {
    this.#opts = opts;
  }

  /** The server address handed to agents. */
  get serverAddress(): string {
    const { host, port } = this.#opts.server;
    const dial = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
    return formatAddress({ host: dial, port });
  }

  /** Starts the VM's agent; with `restart`, a running one is stopped first, otherwise it is kept. */
  start(spec: LocalAgentSpec, opts: { restart?: boolean } = {}): Promise<LocalAgentInfo> {
    return this.#locked(spec.vm, async () => {
      if (this.#closed) throw new Error('the local agent supervisor is stopped');
      const cur = this.#entries.get(spec.vm);
      await this.#startSshd(spec);
      if (cur !== undefined && cur.lastExit === null && opts.restart !== true) return this.#info(cur);
      if (cur !== undefined) await this.#stopEntry(cur, this.#grace);
      await reapOrphan(spec, this.#agentBin, this.#grace);
      return this.#info(await this.#spawn(spec, 0));
    });
  }

  /** The VM's sshd; one that cannot start is logged and leaves the VM without SSH, not without its agent. */
  async #startSshd(spec: LocalAgentSpec): Promise<void> {
    try {
      await this.#opts.sshd?.start({ vm: spec.vm, vmDir: spec.vmDir, instanceId: spec.instanceId });
    } catch (err) {
      this.#opts.logger?.error({ vm: spec.vm, err }, 'local sshd could not be started; the VM has no SSH endpoint');
    }
  }

  /**
   * The VM powered off: stops its agent and ends every other process of the VM, and waits until
   * they are gone. Resolves false when no agent was running.
   */
  stop(vm: string): Promise<boolean> {
    return this.#locked(vm, async () => {
      await this.#opts.sshd?.stop(vm);
      const cur = this.#entries.get(vm);
      if (cur === undefined) return false;
      this.#entries.delete(vm);
      const wasRunning = cur.lastExit === null;
      await this.#stopEntries([cur], [cur.spec.vmDir], this.#grace);
      return wasRunning;
    });
  }

  info(vm: string): LocalAgentInfo | null {
    const e = this.#entries.get(vm);
    return e === undefined ? null : this.#info(e);
  }

  list(): LocalAgentInfo[] {
    return [...this.#entries.values()].map((e) => this.#info(e));
  }

  /**
   * sandboxd stops: refuses new starts, stops every agent (in parallel) and ends every process of
   * the VMs that end with sandboxd. `graceMs` (default `stopGraceMs`, never more) bounds the
   * SIGTERM → SIGKILL wait, so the whole stop fits a shutdown deadline. Idempotent.
   */
  async stopAll(opts: { graceMs?: number } = {}): Promise<void> {
    this.#closed = true;
    // A start already past its check may still add an entry: let every queued start or stop finish.
    await Promise.all([...this.#locks.values()]);
    await this.#opts.sshd?.stopAll();
    const entries = [...this.#entries.values()];
    this.#entries.clear();
    const graceMs = Math.min(this.#grace, opts.graceMs ?? this.#grace);
    await this.#stopEntries(
      entries,
      entries.filter((e) => e.spec.endsWithServer).map((e) => e.spec.vmDir),
      graceMs,
    );
  }

  /**
   * At sandboxd's start: ends every process that a sandboxd which died without stopping left of
   * these VMs (none of them runs any more, so nothing of theirs may either). Logs each one.
   */
  async reapLeftovers(vms: readonly Pick<LocalAgentSpec, 'vm' | 'vmDir' | 'pidPath'>[]): Promise<EndedVmProcesses> {
    const result = await endVmProcesses(
      vms.map((v) => v.vmDir),
      { graceMs: this.#grace },
    );
    // An agent of a build without the environment mark is still found by its pid file.
    await Promise.all(vms.map((v) => reapOrphan(v, this.#agentBin, this.#grace)));
    if (result.survivors.length === 0) await Promise.all(vms.map((v) => removeOutsideTmuxDir(v.vmDir)));
    this.#logEnded(result, 'warn', 'ended a process that an earlier sandboxd left running');
    return result;
  }

  get #agentBin(): string {
    return this.#opts.agentBin ?? DEFAULT_AGENT_BIN;
  }

  get #find(): { find?: ProcessFinder } {
    return this.#opts.findProcesses === undefined ? {} : { find: this.#opts.findProcesses };
  }

  get #grace(): number {
    return this.#opts.stopGraceMs ?? 5000;
  }

  async #spawn(spec: LocalAgentSpec, restarts: number): Promise<Entry> {
    await mkdir(spec.workDir, { recursive: true, mode: 0o700 });
    await rotateLog(spec.logPath);
    const args = [
      this.#agentBin,
      '--server',
      this.serverAddress,
      '--certs',
      spec.certsDir,
      '--agent-id',
      spec.vm,
      '--instance-id',
      spec.instanceId,
      '--profile',
      spec.profile,
      '--work-dir',
      spec.workDir,
    ];
    if (spec.bootstrapTokenFile !== undefined && (await stat(spec.bootstrapTokenFile).catch(() => null)) !== null)
      args.push('--bootstrap-token-file', spec.bootstrapTokenFile);
    const labels = Object.entries(spec.labels ?? {}).filter(([k, v]) => !/[,=]/.test(k) && !/[,=]/.test(v));
    if (labels.length > 0) args.push('--labels', labels.map(([k, v]) => `${k}=${v}`).join(','));
    // A VM that ends with sandboxd: its agent's stdin is a pipe we hold, which closes however we
    // end (SIGKILL too), and the agent then stops by itself instead of reconnecting forever.
    if (spec.endsWithServer) args.push('--exit-with', 'stdin');
    const nodePath = this.#opts.nodePath ?? process.execPath;
    const fd = openSync(spec.logPath, 'a', 0o600);
    let child: ChildProcess;
    try {
      child = spawn(nodePath, args, {
        cwd: spec.workDir,
        stdio: [spec.endsWithServer ? 'pipe' : 'ignore', fd, fd],
        env: await localAgentEnv(spec),
      });
    } finally {
      closeSync(fd);
    }
    // Nothing is written to it; an agent that exits first must not make it throw (EPIPE).
    child.stdin?.on('error', () => undefined);
    const entry: Entry = {
      spec,
      child,
      argv: [nodePath, ...args],
      startedAtMs: Date.now(),
      exited: Promise.resolve(),
      lastExit: null,
      restarts,
      stopping: false,
      restartTimer: null,
    };
    entry.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        entry.lastExit = { code, signal };
        void rm(spec.pidPath, { force: true }).catch(() => undefined);
        resolve();
        this.#onExit(entry);
      });
      child.once('error', (err) => {
        // spawn failed (no node binary): there will be no 'exit'.
        if (entry.lastExit !== null) return;
        entry.lastExit = { code: null, signal: null };
        this.#opts.logger?.error({ vm: spec.vm, err }, 'local agent could not be started');
        resolve();
      });
    });
    this.#entries.set(spec.vm, entry);
    if (child.pid !== undefined) await writeFile(spec.pidPath, `${child.pid}\n`, { mode: 0o600 });
    this.#opts.logger?.info({ vm: spec.vm, pid: child.pid, log: spec.logPath }, 'local agent started');
    return entry;
  }

  #onExit(entry: Entry): void {
    const { vm } = entry.spec;
    if (entry.stopping || this.#entries.get(vm) !== entry) return;
    const code = entry.lastExit?.code ?? null;
    this.#opts.logger?.warn({ vm, pid: entry.child.pid, code, signal: entry.lastExit?.signal }, 'local agent exited on its own');
    if (this.#opts.restartOnCrash === false || code === 0 || code === 2 || this.#closed) return;
    const ranMs = Date.now() - entry.startedAtMs;
    const restarts = ranMs >= 60_000 ? 0 : entry.restarts + 1;
    const delayMs = Math.min(MAX_RESTART_DELAY_MS, 1000 * 2 ** Math.max(0, restarts - 1));
    entry.restartTimer = setTimeout(() => {
      entry.restartTimer = null;
      void this.#locked(vm, async () => {
        if (this.#closed || this.#entries.get(vm) !== entry || entry.stopping) return;
        await this.#spawn(entry.spec, restarts);
      }).catch((err: unknown) => this.#opts.logger?.error({ vm, err }, 'local agent restart failed'));
    }, delayMs);
    entry.restartTimer.unref();
  }

  async #stopEntry(entry: Entry, graceMs: number): Promise<void> {
    entry.stopping = true;
    if (entry.restartTimer !== null) clearTimeout(entry.restartTimer);
    if (entry.lastExit === null) await terminate(entry.child, entry.exited, graceMs);
    await rm(entry.spec.pidPath, { force: true });
    this.#opts.logger?.info({ vm: entry.spec.vm, pid: entry.child.pid, exit: entry.lastExit }, 'local agent stopped');
  }

  /**
   * Stops the agents of `entries` and ends every process of the VMs in `powerOff`. Both at once,
   * so the whole stop takes one grace period, not two: the agents are left out of the sweep (each
   * is stopped and reaped by #stopEntry); a last sweep once they are gone kills (no second grace)
   * what they started meanwhile.
   */
  async #stopEntries(entries: readonly Entry[], powerOff: readonly string[], graceMs: number): Promise<void> {
    const agents = new Set(entries.flatMap((e) => (e.child.pid === undefined ? [] : [e.child.pid])));
    const [, during] = await Promise.all([
      Promise.all(entries.map((e) => this.#stopEntry(e, graceMs))),
      endVmProcesses(powerOff, { graceMs, exclude: agents, ...this.#find }),
    ]);
    const after = await endVmProcesses(powerOff, { graceMs: 0, ...this.#find });
    const result = { ended: [...during.ended, ...after.ended], survivors: after.survivors };
    if (result.survivors.length === 0) await Promise.all(powerOff.map((d) => removeOutsideTmuxDir(d)));
    this.#logEnded(result, 'info', 'ended a process of a stopped local VM');
  }

  #logEnded(r: EndedVmProcesses, level: 'info' | 'warn', what: string): void {
    for (const p of r.ended) this.#opts.logger?.[level]({ vmDir: p.vmDir, pid: p.pid, cmdline: p.cmdline }, what);
    for (const p of r.survivors)
      this.#opts.logger?.warn({ vmDir: p.vmDir, pid: p.pid, cmdline: p.cmdline }, 'a process of a local VM survived SIGKILL');
  }

  #info(e: Entry): LocalAgentInfo {
    return {
      vm: e.spec.vm,
      pid: e.child.pid ?? -1,
      argv: e.argv,
      cwd: e.spec.workDir,
      logPath: e.spec.logPath,
      startedAtMs: e.startedAtMs,
      running: e.lastExit === null,
      lastExit: e.lastExit,
      restarts: e.restarts,
    };
  }

  async #locked<T>(vm: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(vm) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.#locks.set(vm, tail);
    try {
      return await run;
    } finally {
      if (this.#locks.get(vm) === tail) this.#locks.delete(vm);
    }
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited (reaped). */
async function terminate(child: ChildProcess, exited: Promise<void>, graceMs: number): Promise<void> {
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), graceMs);
    timer.unref();
  });
  const first = await Promise.race([exited.then(() => 'exited' as const), graceOver]);
  clearTimeout(timer);
  if (first === 'late') {
    child.kill('SIGKILL');
    await exited;
  }
}

/** Stops a sandbox-agent of this VM left behind by an earlier sandboxd (see the file comment). */
async function reapOrphan(spec: Pick<LocalAgentSpec, 'vm' | 'pidPath'>, agentBin: string, graceMs: number): Promise<void> {
  const pid = Number((await readFile(spec.pidPath, 'utf8').catch(() => '')).trim());
  if (!Number.isSafeInteger(pid) || pid <= 1 || pid === process.pid) return;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  const args = cmdline.split('\0');
  const ours = args.includes(agentBin) && args[args.indexOf('--agent-id') + 1] === spec.vm;
  if (ours) {
    signal(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (alive(pid)) signal(pid, 'SIGKILL');
  }
  await rm(spec.pidPath, { force: true });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

async function rotateLog(path: string): Promise<void> {
  const size = await stat(path).then(
    (s) => s.size,
    () => 0,
  );
  if (size > AGENT_LOG_ROTATE_BYTES) await rename(path, `${path}.1`);
}

/**
 * The environment of a local agent: sandboxd's own, minus TMUX, plus the VM's mark and private
 * TMUX_TMPDIR. Each agent reports and reconciles every session on its tmux server, so local agents
 * sharing one server would kill each other's sessions after a reconnect; a real VM has its own
 * server anyway.
 */
async function localAgentEnv(spec: LocalAgentSpec): Promise<NodeJS.ProcessEnv> {
  await mkdir(localTmuxDir(spec.vmDir), { recursive: true, mode: 0o700 });
  // eslint-disable-next-line no-restricted-properties -- a child process inherits the server's environment
  const { TMUX: _tmux, TMUX_TMPDIR: _dir, ...rest } = process.env;
  return { ...rest, ...spec.env, ...localVmEnv(spec.vmDir) };
}
