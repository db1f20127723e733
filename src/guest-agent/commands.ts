/**
 * The agent's running commands: starts CommandRequests (pipe or PTY), routes StdinChunk and
 * PtyControl to them, enforces timeout_seconds, and emits every chunk and finally the
 * CommandResult into one sink (the OutputBuffer), in order.
 *
 * Decisions (proto/README.md documents the wire side):
 * - capture_output is advisory: output is always streamed (proto3's default false would
 *   otherwise silence every server that does not set it).
 * - run_as is honoured only when the agent runs as root; otherwise the command runs as the
 *   agent's user and a line on the command's log stream says so.
 * - timeout_seconds: SIGTERM to the process group, SIGKILL killGraceMs later;
 *   CommandResult.timed_out_by = "timeout_seconds", and a log-stream line names the timer.
 * - A duplicate command_id (already running) is ignored with a log line: it is most likely a
 *   resend, and a second result would confuse the first.
 */
import { userInfo } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { v1 } from '../../proto/index.js';
import { CommandOutput } from './command-output.js';
import { notStarted, startPipeCommand } from './command-runner.js';
import type { ChunkEntry, ResultEntry } from './output-buffer.js';
import { groupAlive, signalGroup } from './process-group.js';
import { PTY_DEFAULTS, startPtyCommand } from './pty-runner.js';
import type { CommandSpec, ExitInfo, RunningCommand } from './running-command.js';
import { checkSpawnable, resolveUser } from './spawn-check.js';

/** CommandResult.timed_out_by when timeout_seconds ended the command. */
export const TIMED_OUT_BY_TIMEOUT = 'timeout_seconds';

export interface CommandManagerOptions {
  /** Directory for an empty working_dir, base of a relative one. */
  readonly workDir: string;
  /** Environment under CommandRequest.env. */
  readonly childEnv: Readonly<Record<string, string>>;
  /** SIGTERM → SIGKILL delay, in ms. */
  readonly killGraceMs: number;
  readonly log: Logger;
  /** Receives chunks and results, in order. */
  readonly emit: (entry: ChunkEntry | ResultEntry) => void;
  /** Whether run_as may switch users. Default: the agent's uid is 0. */
  readonly isRoot?: boolean;
}

/** A command the agent is running (for heartbeats and session reports). */
export interface TrackedCommand {
  readonly commandId: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly sessionId: string;
  readonly sessionName: string;
  readonly isPty: boolean;
  /** Unix ms. */
  readonly startedAtMs: number;
  /** Leader pid (= process group id); -1 while starting. */
  readonly pid: number;
}

interface Entry {
  readonly info: { -readonly [K in keyof TrackedCommand]: TrackedCommand[K] };
  readonly out: CommandOutput;
  running: RunningCommand | undefined;
  /** Stdin that arrived while the command was still starting. */
  readonly early: { data: Uint8Array; eof: boolean }[];
  /** The last resize that arrived while the PTY command was still starting (applied once it runs). */
  earlyResize: { cols: number; rows: number } | undefined;
  timedOutBy: string;
  timer: NodeJS.Timeout | undefined;
  /** False while backpressure holds the command's output (applied once it runs). */
  reading: boolean;
  readonly done: Promise<void>;
}

export class CommandManager {
  readonly #opts: CommandManagerOptions;
  readonly #isRoot: boolean;
  readonly #commands = new Map<string, Entry>();
  #refusing: string | undefined;

  constructor(opts: CommandManagerOptions) {
    this.#opts = opts;
    this.#isRoot = opts.isRoot ?? process.getuid?.() === 0;
  }

  /** Commands started and not yet finished. */
  get runningCount(): number {
    return this.#commands.size;
  }

  list(): TrackedCommand[] {
    return [...this.#commands.values()].map((e) => ({ ...e.info }));
  }

  /** From now on every CommandRequest gets exit_code -1 with this reason (shutdown). */
  refuseNew(reason: string): void {
    this.#refusing = reason;
  }

  /** Starts a CommandRequest; its chunks and result go to emit. Never throws. */
  start(req: v1.ICommandRequest): void {
    const commandId = req.commandId ?? '';
    const log = this.#opts.log.child({ commandId });
    if (commandId === '') {
      log.warn('command without command_id ignored');
      return;
    }
    if (this.#commands.has(commandId)) {
      log.warn('command_id is already running; duplicate request ignored');
      return;
    }
    let resolveDone!: () => void;
    const out = new CommandOutput({ commandId, emit: this.#opts.emit });
    const entry: Entry = {
      info: {
        commandId,
        command: req.command ?? '',
        args: req.args ?? [],
        sessionId: req.sessionId ?? '',
        sessionName: req.sessionName ?? '',
        isPty: req.allocatePty === true,
        startedAtMs: Date.now(),
        pid: -1,
      },
      out,
      running: undefined,
      early: [],
      earlyResize: undefined,
      timedOutBy: '',
      timer: undefined,
      reading: true,
      done: new Promise<void>((r) => (resolveDone = r)),
    };
    this.#commands.set(commandId, entry);
    const t0 = performance.now();
    this.#launch(req, entry, log)
      .catch((err: unknown) => notStarted(`internal error: ${(err as Error).message}`))
      .then((exit) => {
        clearTimeout(entry.timer);
        if (out.used('log')) out.end('log');
        const durationMs = Math.round(performance.now() - t0);
        this.#commands.delete(commandId);
        log.info(
          { exitCode: exit.exitCode, durationMs, timedOutBy: entry.timedOutBy || undefined, error: exit.error || undefined },
          'command finished',
        );
        this.#opts.emit({
          kind: 'result',
          commandId,
          exitCode: exit.exitCode,
          error: exit.error,
          durationMs,
          timedOutBy: entry.timedOutBy,
          lastSeq: out.lastSeq,
        });
        resolveDone();
      })
      .catch((err: unknown) => log.error({ err }, 'command bookkeeping failed'));
  }

  async #launch(req: v1.ICommandRequest, entry: Entry, log: Logger): Promise<ExitInfo> {
    if (this.#refusing !== undefined) return notStarted(this.#refusing);
    const spec = await this.#resolveSpec(req, entry);
    if (typeof spec === 'string') return notStarted(spec);
    const why = await checkSpawnable(spec.command, spec.cwd, spec.env.PATH);
    if (why !== undefined) return notStarted(why);
    let running: RunningCommand;
    if (entry.info.isPty) {
      const pty = {
        cols: req.ptyCols || PTY_DEFAULTS.cols,
        rows: req.ptyRows || PTY_DEFAULTS.rows,
        term: req.ptyTerm || PTY_DEFAULTS.term,
      };
      const started = startPtyCommand(spec, pty, entry.out);
      if (!started.tailDrainInstalled) log.warn('node-pty internals changed: the PTY tail-loss work-around is off');
      running = started.command;
    } else {
      running = startPipeCommand(spec, entry.out);
    }
    entry.running = running;
    entry.info.pid = running.pid;
    if (!entry.reading) running.setReading(false);
    log.info({ pid: running.pid, pty: running.isPty, command: spec.command }, 'command started');
    // The newest early size before the early input: a program that reads the input and then asks
    // for its size must find the size the client set (a resize after the input would race it).
    if (entry.earlyResize !== undefined) running.resize(entry.earlyResize.cols, entry.earlyResize.rows);
    entry.earlyResize = undefined;
    for (const s of entry.early.splice(0)) running.writeStdin(s.data, s.eof);
    const timeoutS = req.timeoutSeconds ?? 0;
    if (timeoutS > 0) {
      entry.timer = setTimeout(() => {
        entry.timedOutBy = TIMED_OUT_BY_TIMEOUT;
        const graceMs = this.#opts.killGraceMs;
        entry.out.write(
          'log',
          Buffer.from(`sandbox-agent: timeout_seconds=${timeoutS} elapsed; SIGTERM to the process group, SIGKILL after ${graceMs} ms\n`),
        );
        log.warn({ timeoutS }, 'command timed out');
        running.terminate(graceMs).catch((err: unknown) => log.error({ err }, 'terminate failed'));
      }, timeoutS * 1000);
      entry.timer.unref();
    }
    return running.exited;
  }

  /** The spec to run, or why it cannot run. */
  async #resolveSpec(req: v1.ICommandRequest, entry: Entry): Promise<CommandSpec | string> {
    const env: Record<string, string> = { ...this.#opts.childEnv };
    for (const [k, v] of Object.entries(req.env ?? {})) {
      if (k === '' || k.includes('=') || k.includes('\0') || v.includes('\0')) return `env name "${k}" is not valid`;
      env[k] = v;
    }
    let uid: number | undefined;
    let gid: number | undefined;
    let home = env.HOME ?? userInfo().homedir;
    const runAs = req.runAs ?? '';
    if (runAs !== '') {
      if (this.#isRoot) {
        try {
          const u = await resolveUser(runAs);
          ({ uid, gid, home } = u);
          Object.assign(env, { HOME: u.home, USER: u.name, LOGNAME: u.name, SHELL: u.shell });
        } catch (err) {
          return (err as Error).message;
        }
      } else if (runAs !== userInfo().username) {
        entry.out.write('log', Buffer.from(`sandbox-agent: run_as=${runAs} ignored: the agent does not run as root\n`));
      }
    }
    const wd = req.workingDir ?? '';
    const cwd = wd === '' ? this.#opts.workDir : wd === '~' ? home : isAbsolute(wd) ? wd : resolve(this.#opts.workDir, wd);
    return {
      commandId: entry.info.commandId,
      command: req.command ?? '',
      args: req.args ?? [],
      cwd,
      env,
      ...(uid !== undefined ? { uid } : {}),
      ...(gid !== undefined ? { gid } : {}),
    };
  }

  /** Backpressure (output-flow.ts): stops or restarts reading a command's output; unknown ids are ignored. */
  setReading(commandId: string, reading: boolean): void {
    const e = this.#commands.get(commandId);
    if (e === undefined || e.reading === reading) return;
    e.reading = reading;
    e.running?.setReading(reading);
  }

  /** StdinChunk: to the command's stdin; held while it starts; dropped for unknown ids. */
  stdin(chunk: v1.IStdinChunk): void {
    const e = this.#commands.get(chunk.commandId ?? '');
    if (!e) {
      this.#opts.log.debug({ commandId: chunk.commandId }, 'stdin for an unknown command dropped');
      return;
    }
    const data = chunk.data ?? new Uint8Array(0);
    if (e.running) e.running.writeStdin(data, chunk.eof === true);
    else e.early.push({ data, eof: chunk.eof === true });
  }

  /** PtyControl: resize (PTY commands) or a signal to the command's process group. */
  control(ctl: v1.IPtyControl): void {
    const e = this.#commands.get(ctl.commandId ?? '');
    const log = this.#opts.log.child({ commandId: ctl.commandId });
    if (e !== undefined && e.running === undefined && ctl.resize) {
      // A PTY command still starting keeps the newest size and applies it once it runs: the
      // server believes the size applied and will not send the same one again.
      e.earlyResize = { cols: ctl.resize.cols ?? 0, rows: ctl.resize.rows ?? 0 };
      return;
    }
    if (!e?.running) {
      log.debug('pty_control for an unknown or starting command dropped');
      return;
    }
    if (ctl.resize) {
      if (!e.running.resize(ctl.resize.cols ?? 0, ctl.resize.rows ?? 0)) log.debug({ resize: ctl.resize }, 'resize not applied');
    } else if (ctl.signal) {
      const signo = ctl.signal.signalNumber ?? 0;
      if (!e.running.signal(signo)) log.debug({ signo }, 'signal not delivered');
    }
  }

  /** SIGTERM, grace, SIGKILL; resolves true when the command finished (or was not running). */
  async kill(commandId: string, graceMs: number): Promise<boolean> {
    const e = this.#commands.get(commandId);
    if (!e) return true;
    await e.running?.terminate(graceMs);
    const gone = await Promise.race([e.done.then(() => true), sleepFalse(5000)]);
    return gone && !(e.running !== undefined && groupAlive(e.running.pid));
  }

  /**
   * Waits up to graceMs for every command to finish, then SIGKILLs the process groups of those
   * left and waits (at most 5 s) for their results.
   */
  async stopAll(graceMs: number): Promise<void> {
    const all = (): Promise<unknown> => Promise.all([...this.#commands.values()].map((e) => e.done));
    if (this.#commands.size === 0) return;
    await Promise.race([all(), sleepFalse(graceMs)]);
    for (const e of this.#commands.values()) if (e.running && e.running.pid > 0) signalGroup(e.running.pid, 'SIGKILL');
    await Promise.race([all(), sleepFalse(5000)]);
  }
}

function sleepFalse(ms: number): Promise<false> {
  return new Promise((res) => setTimeout(() => res(false), ms).unref());
}
