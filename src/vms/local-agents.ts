/**
 * Local `sandbox-agent` processes: on the libvirt test driver a VM runs no guest, so sandboxd
 * plays the guest's part and runs the VM's agent as a child process (DESIGN.md "each test VM
 * gets a local agent process"):
 *
 *   node <dist>/src/bin/sandbox-agent.js --server HOST:PORT --certs <vm>/certs --agent-id <vm>
 *        --instance-id <uuid> --profile P --work-dir <vm>/work [--labels k=v,...]
 *
 * cwd <vm>/work; stdout and stderr appended to <vm>/agent.log. The process is this VM's "guest
 * service": it is started when the VM starts and stopped (SIGTERM, then SIGKILL after
 * `stopGraceMs`, and always reaped) when the VM stops, is destroyed or deleted. A process that
 * dies on its own while its VM runs is restarted like a systemd Restart=on-failure unit: after
 * 1 s, doubling to 30 s, the delay reset once it has run a minute; exit codes 0 (the server's
 * ShutdownSignal) and 2 (bad configuration) are not restarted.
 *
 * Orphans: the pid is written to <vm>/agent.pid. If sandboxd died without stopping its agents,
 * the next start of that VM's agent finds the pid, checks /proc/<pid>/cmdline really is this
 * VM's sandbox-agent, and stops it first.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { formatAddress, type ListenAddress } from '../config/parsers.js';

/** Default path of the agent entry point: the sibling build output of this module. */
export const DEFAULT_AGENT_BIN = fileURLToPath(new URL('../bin/sandbox-agent.js', import.meta.url));
/** agent.log is rotated (once, to agent.log.1) when larger than this at a start, bytes. */
export const AGENT_LOG_ROTATE_BYTES = 16 * 1024 * 1024;

export interface LocalAgentSpec {
  readonly vm: string;
  readonly instanceId: string;
  readonly profile: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly certsDir: string;
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
  logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
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
      if (cur !== undefined && cur.lastExit === null && opts.restart !== true) return this.#info(cur);
      if (cur !== undefined) await this.#stopEntry(cur);
      await reapOrphan(spec, this.#agentBin, this.#grace);
      return this.#info(await this.#spawn(spec, 0));
    });
  }

  /** Stops the VM's agent and waits until it has exited. Resolves false when none was running. */
  stop(vm: string): Promise<boolean> {
    return this.#locked(vm, async () => {
      const cur = this.#entries.get(vm);
      if (cur === undefined) return false;
      this.#entries.delete(vm);
      const wasRunning = cur.lastExit === null;
      await this.#stopEntry(cur);
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

  /** Stops every agent (in parallel) and refuses new starts. Idempotent. */
  async stopAll(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#entries.keys()].map((vm) => this.stop(vm)));
  }

  get #agentBin(): string {
    return this.#opts.agentBin ?? DEFAULT_AGENT_BIN;
  }

  get #grace(): number {
    return this.#opts.stopGraceMs ?? 5000;
  }

  async #spawn(spec: LocalAgentSpec, restarts: number): Promise<Entry> {
    await mkdir(spec.workDir, { recursive: true, mode: 0o700 });
    await rotateLog(spec.logPath);
    const args = [
      this.#agentBin,
      '--server', this.serverAddress,
      '--certs', spec.certsDir,
      '--agent-id', spec.vm,
      '--instance-id', spec.instanceId,
      '--profile', spec.profile,
      '--work-dir', spec.workDir,
    ];
    const labels = Object.entries(spec.labels ?? {}).filter(([k, v]) => !/[,=]/.test(k) && !/[,=]/.test(v));
    if (labels.length > 0) args.push('--labels', labels.map(([k, v]) => `${k}=${v}`).join(','));
    const nodePath = this.#opts.nodePath ?? process.execPath;
    const fd = openSync(spec.logPath, 'a', 0o600);
    let child: ChildProcess;
    try {
      child = spawn(nodePath, args, { cwd: spec.workDir, stdio: ['ignore', fd, fd], env: await localAgentEnv(spec) });
    } finally {
      closeSync(fd);
    }
    const entry: Entry = {
      spec, child, argv: [nodePath, ...args], startedAtMs: Date.now(), exited: Promise.resolve(), lastExit: null, restarts, stopping: false, restartTimer: null,
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

  async #stopEntry(entry: Entry): Promise<void> {
    entry.stopping = true;
    if (entry.restartTimer !== null) clearTimeout(entry.restartTimer);
    if (entry.lastExit === null) await terminate(entry.child, entry.exited, this.#grace);
    await rm(entry.spec.pidPath, { force: true });
    this.#opts.logger?.info({ vm: entry.spec.vm, pid: entry.child.pid, exit: entry.lastExit }, 'local agent stopped');
  }

  #info(e: Entry): LocalAgentInfo {
    return {
      vm: e.spec.vm, pid: e.child.pid ?? -1, argv: e.argv, cwd: e.spec.workDir, logPath: e.spec.logPath,
      startedAtMs: e.startedAtMs, running: e.lastExit === null, lastExit: e.lastExit, restarts: e.restarts,
    };
  }

  async #locked<T>(vm: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(vm) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.then(() => undefined, () => undefined);
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
async function reapOrphan(spec: LocalAgentSpec, agentBin: string, graceMs: number): Promise<void> {
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
  const size = await stat(path).then((s) => s.size, () => 0);
  if (size > AGENT_LOG_ROTATE_BYTES) await rename(path, `${path}.1`);
}

/**
 * The environment of a local agent: sandboxd's own, minus TMUX, plus a private TMUX_TMPDIR.
 * Each agent reports and reconciles every session on its tmux server, so local agents sharing one
 * server would kill each other's sessions after a reconnect; a real VM has its own server anyway.
 * tmux socket paths must stay under ~100 bytes, hence a short directory under /tmp keyed by VM.
 */
async function localAgentEnv(spec: LocalAgentSpec): Promise<NodeJS.ProcessEnv> {
  const tmuxDir = join(tmpdir(), `sbx-tmux-${createHash('sha256').update(spec.workDir).digest('hex').slice(0, 12)}`);
  await mkdir(tmuxDir, { recursive: true, mode: 0o700 });
  // eslint-disable-next-line no-restricted-properties -- a child process inherits the server's environment
  const { TMUX: _tmux, TMUX_TMPDIR: _dir, ...rest } = process.env;
  return { ...rest, TMUX_TMPDIR: tmuxDir };
}
