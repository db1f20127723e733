/**
 * A SessionAgentPort that does locally what the agent does for sessions: PTY commands through
 * node-pty (output as Buffers, numbered per command like OutputChunk.seq; working_dir and env
 * applied), one-shot commands without a shell, SessionReport from its running commands,
 * SessionReconcile by killing with the tmux kill script. Real tmux, real PTYs; only the gRPC hop is missing. `sink` is where output
 * and results go (switch it to simulate a restart of sandboxd; null drops them).
 */
import { resolve } from 'node:path';
import { spawn as ptySpawn, type IPty } from 'node-pty';
import { SvcError } from '../../../src/core/errors.js';
import type { OneShotCommandRequest, OneShotResult, PtyCommandRequest, SessionAgentPort } from '../../../src/sessions/agent-port.js';
import type { SessionReconcileFields } from '../../../src/sessions/reconcile.js';
import { killOutcomeOf, tmuxKillArgv } from '../../../src/core/tmux-argv.js';
import type { TmuxHarness } from './tmux-harness.js';

export interface CommandSink {
  commandOutput(commandId: string, seq: number, data: Uint8Array): void;
  commandFinished(commandId: string, exitCode: number): void;
}

interface Running {
  readonly pty: IPty;
  readonly req: PtyCommandRequest;
  seq: number;
  detached: boolean;
}

export class LocalAgentPort implements SessionAgentPort {
  sink: CommandSink | null = null;
  connected = true;
  readonly running = new Map<string, Running>();
  readonly oneShots: string[][] = [];
  readonly #h: TmuxHarness;
  /** PTYs of a crashed "agent" (forgotten, maybe not yet exited): close() makes sure they end. */
  readonly #dead: IPty[] = [];

  constructor(h: TmuxHarness) {
    this.#h = h;
  }

  startPty(_agentId: string, req: PtyCommandRequest): Promise<void> {
    if (!this.connected) return Promise.reject(new SvcError('server.unavailable', 'agent not connected'));
    const [file, ...args] = req.argv;
    const pty = ptySpawn(file ?? 'false', args, {
      name: req.term,
      cols: req.cols,
      rows: req.rows,
      // As the agent does: working_dir relative to its work directory, env over its own.
      cwd: req.workingDir === undefined ? this.#h.dir : resolve(this.#h.dir, req.workingDir),
      env: { ...this.#h.env, ...req.env },
      encoding: null,
    });
    const run: Running = { pty, req, seq: 0, detached: false };
    this.running.set(req.commandId, run);
    pty.onData((d) => {
      if (!run.detached) this.sink?.commandOutput(req.commandId, ++run.seq, Buffer.from(d as unknown as Buffer));
    });
    pty.onExit(({ exitCode }) => {
      if (this.running.get(req.commandId) === run) this.running.delete(req.commandId);
      if (!run.detached) this.sink?.commandFinished(req.commandId, exitCode);
    });
    return Promise.resolve();
  }

  writeStdin(_agentId: string, commandId: string, data: Uint8Array): boolean {
    const r = this.running.get(commandId);
    if (!this.connected || r === undefined) return false;
    r.pty.write(Buffer.from(data));
    return true;
  }

  resizePty(_agentId: string, commandId: string, cols: number, rows: number): boolean {
    const r = this.running.get(commandId);
    if (!this.connected || r === undefined) return false;
    r.pty.resize(cols, rows);
    return true;
  }

  async runCommand(_agentId: string, req: OneShotCommandRequest): Promise<OneShotResult> {
    if (!this.connected) throw new SvcError('server.unavailable', 'agent not connected');
    this.oneShots.push([...req.argv]);
    const r = await this.#h.exec(req.argv);
    return { exitCode: r.exitCode, output: r.stdout + r.stderr };
  }

  /**
   * The agent process dies: its PTY clients die with it, and it tells nobody. The restarted
   * agent knows none of the old commands, so they leave `running` (and the next report) at
   * once, not when node-pty gets round to reporting their exit: that comes only after the tmux
   * client's SIGHUP round trip to its server and the PTY socket's close, which on a loaded
   * machine can be later than the reconnect's SessionReport, which then listed the dead command
   * as running and the session was never re-attached.
   */
  crashAgent(): void {
    for (const [id, r] of this.running) {
      r.detached = true;
      this.running.delete(id);
      this.#dead.push(r.pty);
      r.pty.kill('SIGHUP');
    }
  }

  /** SessionReport.sessions, as the agent builds it from its commands. */
  report(): { commandId: string; sessionId: string; sessionName: string; isPty: boolean; pid: number }[] {
    return [...this.running.values()].map((r) => ({
      commandId: r.req.commandId,
      sessionId: r.req.sessionId,
      sessionName: r.req.sessionName,
      isPty: true,
      pid: r.pty.pid,
    }));
  }

  /** SessionReconcile: kill the listed sessions (their tmux sessions, whole), answer the ack. */
  async reconcile(msg: SessionReconcileFields): Promise<{ killedSessionIds: string[]; keptSessionIds: string[]; failedToKill: string[] }> {
    const ack = { killedSessionIds: [] as string[], keptSessionIds: [...msg.keepSessionIds], failedToKill: [] as string[] };
    for (const id of msg.killSessionIds) {
      const r = [...this.running.values()].find((x) => x.req.sessionId === id || x.req.commandId === id);
      if (r === undefined) {
        ack.killedSessionIds.push(id);
        continue;
      }
      const res = await this.#h.exec(
        tmuxKillArgv({ socket: this.#h.socket, sessionName: r.req.sessionName, signal: 'TERM', graceSeconds: msg.gracePeriodSeconds }),
      );
      (killOutcomeOf(res.exitCode) === 'failed' ? ack.failedToKill : ack.killedSessionIds).push(id);
    }
    return ack;
  }

  close(): void {
    for (const r of this.running.values()) r.detached = true;
    for (const pty of [...[...this.running.values()].map((r) => r.pty), ...this.#dead]) {
      try {
        pty.kill();
      } catch {
        // gone
      }
    }
  }
}
