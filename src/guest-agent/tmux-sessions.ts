/**
 * The managed tmux server (`tmux -L sandboxd`, src/core/tmux-argv.ts) as a session source, and
 * the kill of a session whose PTY command is a tmux client of it.
 *
 * Why: a managed session's PTY command is only a tmux *client*; its shell and programs are
 * children of the tmux server. Killing the client's process group (what a plain command kill
 * does) leaves the session running. So:
 * - every tmux session on the managed server is reported as `tmux:<name>` (command_id; the
 *   server keeps the ones it knows by name, re-attaches them after an agent restart, and asks to
 *   kill the others), and
 * - killing one, or killing a command that is a client of the managed server, runs
 *   tmuxKillArgv: signal every process of the panes, KILL after the grace period, kill-session,
 *   verify none is left.
 *
 * tmux runs with the agent's child environment (TMUX_TMPDIR decides which server `-L sandboxd`
 * means), exactly as the PTY commands do.
 */
import { v1 } from '../../proto/index.js';
import {
  execArgv,
  isNoServerError,
  killOutcomeOf,
  parseTmuxPanes,
  tmuxKillArgv,
  tmuxListPanesArgv,
  type ExecResult,
  type TmuxSocket,
} from '../core/tmux-argv.js';
import type { KillOutcome, SessionBackend, SessionInfo, TmuxKiller } from './sessions.js';

/** Prefix of a reported tmux session's command_id (the server's reconcile.ts uses the same). */
export const TMUX_ID_PREFIX = 'tmux:';

export type ArgvRunner = (argv: readonly string[], opts: { env: NodeJS.ProcessEnv; timeoutMs: number }) => Promise<ExecResult>;

export interface TmuxBackendOptions {
  /** Environment tmux runs with (the agent's childEnv). */
  readonly env: Readonly<Record<string, string>>;
  /** Default `-L sandboxd`. */
  readonly socket?: TmuxSocket;
  /** Test seam; default execArgv. */
  readonly run?: ArgvRunner;
}

export class TmuxSessionBackend implements SessionBackend, TmuxKiller {
  readonly name = 'tmux';
  readonly #o: TmuxBackendOptions;
  readonly #run: ArgvRunner;

  constructor(opts: TmuxBackendOptions) {
    this.#o = opts;
    this.#run = opts.run ?? ((argv, o) => execArgv(argv, o));
  }

  async list(): Promise<SessionInfo[]> {
    const r = await this.#run(tmuxListPanesArgv(this.#socket()), { env: { ...this.#o.env }, timeoutMs: 10_000 });
    // No server (never started, or the agent has no tmux): no sessions. Other failures reject so
    // the report is not sent as "nothing runs" when we simply could not look.
    if (r.exitCode !== 0) {
      if (isNoServerError(r.stderr) || r.exitCode === 127) return [];
      throw new Error(`tmux list-panes exited ${r.exitCode}: ${r.stderr.trim().slice(0, 200)}`);
    }
    return parseTmuxPanes(r.stdout).map((s) => ({
      commandId: TMUX_ID_PREFIX + s.name,
      sessionId: '',
      sessionName: s.name,
      sessionType: v1.SessionType.INTERACTIVE,
      command: 'tmux',
      startedAtMs: s.createdAtSecs * 1000,
      pid: s.panePids[0] ?? 0,
      isPty: true,
    }));
  }

  async kill(id: string, graceMs: number): Promise<KillOutcome> {
    if (!id.startsWith(TMUX_ID_PREFIX)) return 'not_found';
    return await this.killSession(id.slice(TMUX_ID_PREFIX.length), graceMs);
  }

  /** Kills tmux session `name` with every process of its panes (verified). */
  async killSession(name: string, graceMs: number): Promise<KillOutcome> {
    const graceSeconds = Math.min(3600, Math.max(0, Math.ceil(graceMs / 1000)));
    const argv = tmuxKillArgv({ sessionName: name, signal: 'TERM', graceSeconds, ...this.#socket() });
    const r = await this.#run(argv, { env: { ...this.#o.env }, timeoutMs: graceSeconds * 1000 + 30_000 });
    return killOutcomeOf(r.exitCode);
  }

  #socket(): { socket?: TmuxSocket } {
    return this.#o.socket === undefined ? {} : { socket: this.#o.socket };
  }
}
