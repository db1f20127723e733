/**
 * The session registry: every live interactive session sandboxd knows, by session id, by agent
 * and by command id, kept in memory and written through to a {@link SessionStore} so it
 * survives a restart of sandboxd. Closed sessions are removed (from memory and disk).
 *
 * At load every session becomes `detached` (cause server_restarted): nothing is known about its
 * PTY until its agent reconnects and reports (reconcile.ts). Session names are unique per agent
 * among live sessions because they are also the tmux session names.
 */
import { randomUUID } from 'node:crypto';
import { SvcError } from '../core/errors.js';
import { StateMachine, type TransitionLogger } from '../core/state-machine.js';
import { SESSION_TRANSITIONS, SessionCause, type SessionCauseName } from './session-state.js';
import type { SessionStore } from './session-store.js';
import {
  SESSION_NAME_PREFIX,
  type SessionBackendName,
  type SessionClassName,
  type SessionRecord,
  type SessionState,
} from './session-types.js';

/** What a state change reports (emit agent.pty.* events, update hubs). */
export interface SessionStateChange {
  readonly record: SessionRecord;
  readonly from: SessionState;
  readonly to: SessionState;
  readonly cause: SessionCauseName;
}

export interface SessionRegistryOptions {
  readonly store: SessionStore;
  readonly logger?: TransitionLogger;
  readonly onStateChange?: (change: SessionStateChange) => void;
  /** Unix ms clock. Default Date.now. */
  readonly now?: () => number;
  /** Id source (tests). Default crypto.randomUUID. */
  readonly newId?: () => string;
}

export interface NewSession {
  /** A pty-ws.v1 join's session id (the client chose it); default a fresh UUID. */
  readonly sessionId?: string;
  readonly agentId: string;
  readonly instanceId: string;
  /** Default tmux/managed. */
  readonly sessionBackend?: SessionBackendName;
  readonly sessionClass?: SessionClassName;
  /** Default `terminal-<first 8 hex of the session id>`. */
  readonly sessionName?: string;
  readonly command: string;
  readonly cols: number;
  readonly rows: number;
}

interface Entry {
  record: SessionRecord;
  readonly machine: StateMachine<SessionState>;
}

export class SessionRegistry {
  readonly #store: SessionStore;
  readonly #opts: SessionRegistryOptions;
  readonly #now: () => number;
  readonly #newId: () => string;
  readonly #byId = new Map<string, Entry>();
  readonly #byCommand = new Map<string, string>();
  readonly #byAgent = new Map<string, Set<string>>();

  /** Loads the stored sessions; each becomes detached (server_restarted). */
  constructor(opts: SessionRegistryOptions) {
    this.#opts = opts;
    this.#store = opts.store;
    this.#now = opts.now ?? Date.now;
    this.#newId = opts.newId ?? randomUUID;
    this.#store.batch(() => {
      for (const rec of this.#store.loadSessions()) {
        if (rec.state === 'closed') {
          this.#store.deleteSession(rec.sessionId);
          continue;
        }
        this.#index(rec);
        this.transition(rec.sessionId, ['starting', 'running'], 'detached', SessionCause.serverRestarted);
      }
    });
  }

  /** Number of live sessions. */
  get size(): number {
    return this.#byId.size;
  }

  get(sessionId: string): SessionRecord | undefined {
    return this.#byId.get(sessionId)?.record;
  }

  /** The session only when it belongs to this agent (routes take both ids). */
  getForAgent(agentId: string, sessionId: string): SessionRecord | undefined {
    const r = this.get(sessionId);
    return r?.agentId === agentId ? r : undefined;
  }

  /** The session whose current PTY command this is. */
  byCommandId(commandId: string): SessionRecord | undefined {
    const id = this.#byCommand.get(commandId);
    return id === undefined ? undefined : this.get(id);
  }

  byName(agentId: string, sessionName: string): SessionRecord | undefined {
    for (const id of this.#byAgent.get(agentId) ?? []) {
      const r = this.get(id);
      if (r?.sessionName === sessionName) return r;
    }
    return undefined;
  }

  /** The agent's sessions, oldest first. */
  listByAgent(agentId: string): SessionRecord[] {
    const out: SessionRecord[] = [];
    for (const id of this.#byAgent.get(agentId) ?? []) {
      const r = this.get(id);
      if (r !== undefined) out.push(r);
    }
    return out.sort((a, b) => a.createdAtMs - b.createdAtMs || a.sessionId.localeCompare(b.sessionId));
  }

  list(): SessionRecord[] {
    return [...this.#byId.values()].map((e) => e.record);
  }

  /**
   * Registers a new session in `starting`, persisted before returning. Throws
   * `session.name_in_use` when the agent has a live session of that name, `session.id_in_use`
   * when a live session has the given id.
   */
  create(input: NewSession): SessionRecord {
    const sessionId = input.sessionId ?? this.#newId();
    if (this.#byId.has(sessionId)) throw new SvcError('session.id_in_use', `a live session has the id ${sessionId}`);
    let name = input.sessionName;
    if (name === undefined) {
      name = `${SESSION_NAME_PREFIX}${sessionId.replace(/-/g, '').slice(0, 8)}`;
      // A short-id clash is unlikely but possible: widen until free.
      for (let n = 12; this.byName(input.agentId, name) !== undefined && n <= 32; n += 4) {
        name = `${SESSION_NAME_PREFIX}${sessionId.replace(/-/g, '').slice(0, n)}`;
      }
    }
    if (this.byName(input.agentId, name) !== undefined) {
      throw new SvcError('session.name_in_use', `agent ${input.agentId} already has a live session named ${name}`);
    }
    const record: SessionRecord = {
      sessionId,
      agentId: input.agentId,
      instanceId: input.instanceId,
      commandId: this.#newId(),
      generation: 0,
      sessionName: name,
      command: input.command,
      sessionType: 'interactive',
      sessionBackend: input.sessionBackend ?? 'tmux',
      sessionClass: input.sessionClass ?? 'managed',
      createdAtMs: this.#now(),
      state: 'starting',
      cols: input.cols,
      rows: input.rows,
      hubEpoch: 0,
    };
    this.#store.putSession(record, this.#now());
    this.#index(record);
    return record;
  }

  /**
   * Guarded state move (core/state-machine.ts); persisted, reported to onStateChange. Moving to
   * `closed` removes the session. Returns whether the state changed.
   */
  transition(sessionId: string, from: readonly SessionState[], to: SessionState, cause: SessionCauseName): boolean {
    const e = this.#byId.get(sessionId);
    if (e === undefined) return false;
    const before = e.record.state;
    if (!e.machine.transition(from, to, cause)) return false;
    e.record = { ...e.record, state: to };
    if (to === 'closed') this.#remove(sessionId);
    else this.#store.putSession(e.record, this.#now());
    this.#opts.onStateChange?.({ record: e.record, from: before, to, cause });
    return true;
  }

  /**
   * A new PTY command for the session (re-attach): new command id, generation + 1, persisted.
   * Returns the updated record.
   */
  replaceCommand(sessionId: string): SessionRecord {
    const e = this.#byId.get(sessionId);
    if (e === undefined) throw new SvcError('session.not_found', `no session ${sessionId}`);
    this.#byCommand.delete(e.record.commandId);
    e.record = { ...e.record, commandId: this.#newId(), generation: e.record.generation + 1 };
    this.#byCommand.set(e.record.commandId, sessionId);
    this.#store.putSession(e.record, this.#now());
    return e.record;
  }

  /**
   * The epoch for a new hub of the session (see SessionRecord.hubEpoch): returns the next unused
   * one and persists the count before the hub numbers any frame.
   */
  takeHubEpoch(sessionId: string): number {
    const e = this.#byId.get(sessionId);
    if (e === undefined) throw new SvcError('session.not_found', `no session ${sessionId}`);
    const epoch = e.record.hubEpoch;
    e.record = { ...e.record, hubEpoch: epoch + 1 };
    this.#store.putSession(e.record, this.#now());
    return epoch;
  }

  /** Remembers the PTY size (persisted so a re-attach starts at the size clients last used). */
  setSize(sessionId: string, cols: number, rows: number): void {
    const e = this.#byId.get(sessionId);
    if (e === undefined || (e.record.cols === cols && e.record.rows === rows)) return;
    e.record = { ...e.record, cols, rows };
    this.#store.putSession(e.record, this.#now());
  }

  /** Forgets a session that never started (a failed create): no event, no transition. */
  discard(sessionId: string): void {
    if (this.#byId.has(sessionId)) this.#remove(sessionId);
  }

  #index(rec: SessionRecord): void {
    const machine = new StateMachine<SessionState>({
      name: 'session',
      initial: rec.state,
      table: SESSION_TRANSITIONS,
      logFields: { session: rec.sessionId, agent: rec.agentId },
      now: this.#now,
      ...(this.#opts.logger !== undefined && { logger: this.#opts.logger }),
    });
    this.#byId.set(rec.sessionId, { record: rec, machine });
    this.#byCommand.set(rec.commandId, rec.sessionId);
    let set = this.#byAgent.get(rec.agentId);
    if (set === undefined) this.#byAgent.set(rec.agentId, (set = new Set()));
    set.add(rec.sessionId);
  }

  #remove(sessionId: string): void {
    const e = this.#byId.get(sessionId);
    if (e === undefined) return;
    this.#byId.delete(sessionId);
    this.#byCommand.delete(e.record.commandId);
    const set = this.#byAgent.get(e.record.agentId);
    set?.delete(sessionId);
    if (set?.size === 0) this.#byAgent.delete(e.record.agentId);
    this.#store.deleteSession(sessionId);
  }
}
