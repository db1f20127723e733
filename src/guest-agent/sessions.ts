/**
 * Sessions for SessionQuery / SessionReconcile (spec 3, "Session reconciliation after server
 * restart"). A session is something long-lived the server may want to keep or end after it
 * restarts. Sources are pluggable SessionBackends: today the agent's own commands that carry a
 * session_id or session_name; tmux sessions arrive later as a second backend.
 *
 * A session's id is its session_id, or its command_id when session_id is empty. Reconcile:
 * listed in kill → killed; else listed in keep → kept; else kill_unrecognized → killed; else
 * kept. Killing is SIGTERM, grace_period_seconds, SIGKILL, then a check that it is gone
 * (failed_to_kill otherwise). Ids in kill that name no session are reported as killed: nothing
 * by that id runs, which is what the server asked for.
 */
import { v1 } from '../../proto/index.js';
import type { CommandManager } from './commands.js';
import { managedTmuxTarget } from './tmux-target.js';

export interface SessionInfo {
  readonly commandId: string;
  readonly sessionId: string;
  readonly sessionName: string;
  readonly sessionType: v1.SessionType;
  readonly command: string;
  /** Unix ms (an epoch, not an elapsed time). */
  readonly startedAtMs: number;
  readonly pid: number;
  readonly isPty: boolean;
}

export type KillOutcome = 'killed' | 'not_found' | 'failed';

/** A source of sessions. */
export interface SessionBackend {
  readonly name: string;
  list(): Promise<SessionInfo[]>;
  /** Ends the session with this id (session id or command id) if it is one of this backend's. */
  kill(id: string, graceMs: number): Promise<KillOutcome>;
}

/** Kills a session of the managed tmux server by name (tmux-sessions.ts). */
export interface TmuxKiller {
  killSession(name: string, graceMs: number): Promise<KillOutcome>;
}

/** The stable id of a session. */
export function sessionKey(s: SessionInfo): string {
  return s.sessionId || s.commandId;
}

/**
 * Sessions = the agent's running commands that carry a session id or name. Killing one that is a
 * client of the managed tmux server kills its tmux session first (tmux-sessions.ts): the client's
 * process group holds none of the session's processes.
 */
export class CommandSessionBackend implements SessionBackend {
  readonly name = 'commands';
  readonly #commands: CommandManager;
  readonly #tmux: TmuxKiller | undefined;

  constructor(commands: CommandManager, tmux?: TmuxKiller) {
    this.#commands = commands;
    this.#tmux = tmux;
  }

  list(): Promise<SessionInfo[]> {
    return Promise.resolve(
      this.#commands
        .list()
        .filter((c) => c.sessionId !== '' || c.sessionName !== '')
        .map((c) => ({
          commandId: c.commandId,
          sessionId: c.sessionId,
          sessionName: c.sessionName,
          sessionType: c.isPty ? v1.SessionType.INTERACTIVE : v1.SessionType.HEADLESS,
          command: [c.command, ...c.args].join(' '),
          startedAtMs: c.startedAtMs,
          pid: c.pid,
          isPty: c.isPty,
        })),
    );
  }

  async kill(id: string, graceMs: number): Promise<KillOutcome> {
    const hit = this.#commands
      .list()
      .find((c) => (c.sessionId !== '' || c.sessionName !== '') && (c.sessionId === id || c.commandId === id));
    if (!hit) return 'not_found';
    const tmuxName = this.#tmux === undefined ? undefined : managedTmuxTarget(hit.command, hit.args);
    const tmuxOutcome = tmuxName === undefined ? 'not_found' : await this.#tmux!.killSession(tmuxName, graceMs);
    // The client exits by itself once its session is gone; the kill makes sure of it.
    const clientKilled = await this.#commands.kill(hit.commandId, graceMs);
    return tmuxOutcome !== 'failed' && clientKilled ? 'killed' : 'failed';
  }
}

export interface ReconcileOutcome {
  readonly killed: string[];
  readonly kept: string[];
  readonly failed: string[];
}

export class SessionManager {
  readonly #backends: readonly SessionBackend[];

  constructor(backends: readonly SessionBackend[]) {
    this.#backends = backends;
  }

  /** Sessions for a SessionReport: all (report_all or no ids given), or those whose id or command id is listed. */
  async report(query: v1.ISessionQuery): Promise<SessionInfo[]> {
    const all = (await Promise.all(this.#backends.map((b) => b.list()))).flat();
    const ids = new Set(query.sessionIds ?? []);
    if (query.reportAll === true || ids.size === 0) return all;
    return all.filter((s) => ids.has(sessionKey(s)) || ids.has(s.commandId));
  }

  async reconcile(req: v1.ISessionReconcile): Promise<ReconcileOutcome> {
    const graceMs = Math.max(0, req.gracePeriodSeconds ?? 0) * 1000;
    const keep = new Set(req.keepSessionIds ?? []);
    const kill = new Set(req.killSessionIds ?? []);
    const out: ReconcileOutcome = { killed: [], kept: [], failed: [] };
    const targets: string[] = [];
    const seen = new Set<string>();
    for (const s of await this.report({ reportAll: true })) {
      const key = sessionKey(s);
      seen.add(key).add(s.commandId);
      const listedKill = kill.has(key) || kill.has(s.commandId);
      const listedKeep = keep.has(key) || keep.has(s.commandId);
      if (listedKill || (!listedKeep && req.killUnrecognized === true)) targets.push(key);
      else out.kept.push(key);
    }
    for (const id of kill) if (!seen.has(id)) out.killed.push(id);
    await Promise.all(
      targets.map(async (id) => {
        const outcome = await this.#killAnywhere(id, graceMs);
        (outcome === 'failed' ? out.failed : out.killed).push(id);
      }),
    );
    return out;
  }

  async #killAnywhere(id: string, graceMs: number): Promise<KillOutcome> {
    for (const b of this.#backends) {
      const r = await b.kill(id, graceMs).catch((): KillOutcome => 'failed');
      if (r !== 'not_found') return r;
    }
    return 'not_found';
  }
}
