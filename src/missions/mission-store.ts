/**
 * Executors and missions, durable: `$SVC_STATE_DIR/missions/missions.db` (better-sqlite3, WAL,
 * synchronous=FULL through openDurableDb), every record also held in memory. An executor row
 * holds the SHA-256 of its bearer token, never the token; nothing here returns the hash to a
 * route. Writes are one small statement at a registration, a dispatch or a mission's change of
 * state: never per output chunk.
 *
 * At open, a mission left assigned or running by a process that died is marked failed
 * (reason server_restarted): nothing follows its command after a restart. The caller emits the
 * mission.failed events for them (`restartedFailures`).
 */
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import type { TransitionLogger } from '../core/state-machine.js';
import { openDurableDb } from '../util/durable-db.js';
import { isTerminal, moveMission, type MissionStatus } from './mission-state.js';

export const MISSIONS_DB_FILE = 'missions.db';
const kSchemaVersion = 1;

export interface ExecutorRecord {
  readonly id: string;
  readonly agentId: string;
  readonly name: string;
  readonly capabilities: readonly string[];
  readonly command: readonly string[] | null;
  /** SHA-256 of the token (32 bytes). */
  readonly tokenHash: Buffer;
  readonly createdAtMs: number;
  readonly createdBy: string;
  readonly lastDispatchAtMs: number | null;
}

export interface MissionRecord {
  readonly id: string;
  readonly sessionId: string;
  readonly executorId: string;
  readonly agentId: string;
  readonly objective: string;
  readonly completion: string;
  readonly longRunning: boolean;
  readonly metadata: Record<string, unknown>;
  readonly status: MissionStatus;
  readonly commandId: string;
  readonly createdAtMs: number;
  readonly startedAtMs: number | null;
  readonly finishedAtMs: number | null;
  readonly exitCode: number | null;
  readonly reason: string | null;
  readonly error: string | null;
}

interface ExecutorRow {
  id: string;
  agent_id: string;
  name: string;
  capabilities: string;
  command: string | null;
  token_hash: Buffer;
  created_at_ms: number;
  created_by: string;
  last_dispatch_at_ms: number | null;
}

interface MissionRow {
  id: string;
  session_id: string;
  executor_id: string;
  agent_id: string;
  objective: string;
  completion: string;
  long_running: number;
  metadata: string;
  status: string;
  command_id: string;
  created_at_ms: number;
  started_at_ms: number | null;
  finished_at_ms: number | null;
  exit_code: number | null;
  reason: string | null;
  error: string | null;
}

export class MissionStore {
  readonly #db: Database.Database;
  readonly #logger: TransitionLogger | undefined;
  readonly #executors = new Map<string, ExecutorRecord>();
  readonly #missions = new Map<string, MissionRecord>();
  readonly #putExecutor: Database.Statement;
  readonly #deleteExecutor: Database.Statement;
  readonly #putMission: Database.Statement;
  readonly #deleteMission: Database.Statement;
  readonly #restarted: MissionRecord[] = [];
  readonly #now: () => number;

  /** Opens (creating) `<dir>/missions.db`. Throws when the directory or the file cannot be used, or is newer. */
  constructor(dir: string, opts: { logger?: TransitionLogger; now?: () => number } = {}) {
    this.#logger = opts.logger;
    this.#now = opts.now ?? Date.now;
    this.#db = openDurableDb(dir, MISSIONS_DB_FILE).db;
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion) {
      this.#db.close();
      throw new Error(`${join(dir, MISSIONS_DB_FILE)} has schema version ${version}, newer than this sandboxd's ${kSchemaVersion}`);
    }
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS executors (
        id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, name TEXT NOT NULL, capabilities TEXT NOT NULL,
        command TEXT, token_hash BLOB NOT NULL, created_at_ms INTEGER NOT NULL, created_by TEXT NOT NULL,
        last_dispatch_at_ms INTEGER
      );
      CREATE TABLE IF NOT EXISTS missions (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL, executor_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        objective TEXT NOT NULL, completion TEXT NOT NULL, long_running INTEGER NOT NULL, metadata TEXT NOT NULL,
        status TEXT NOT NULL, command_id TEXT NOT NULL, created_at_ms INTEGER NOT NULL, started_at_ms INTEGER,
        finished_at_ms INTEGER, exit_code INTEGER, reason TEXT, error TEXT
      );
    `);
    this.#db.pragma(`user_version = ${kSchemaVersion}`);
    this.#putExecutor = this.#db.prepare(
      'INSERT OR REPLACE INTO executors (id, agent_id, name, capabilities, command, token_hash, created_at_ms, created_by, last_dispatch_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    this.#deleteExecutor = this.#db.prepare('DELETE FROM executors WHERE id = ?');
    this.#putMission = this.#db.prepare(
      'INSERT OR REPLACE INTO missions (id, session_id, executor_id, agent_id, objective, completion, long_running, metadata, status, command_id, created_at_ms, started_at_ms, finished_at_ms, exit_code, reason, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    this.#deleteMission = this.#db.prepare('DELETE FROM missions WHERE id = ?');
    for (const r of this.#db.prepare('SELECT * FROM executors ORDER BY created_at_ms, id').all() as ExecutorRow[]) {
      this.#executors.set(r.id, {
        id: r.id,
        agentId: r.agent_id,
        name: r.name,
        capabilities: JSON.parse(r.capabilities) as string[],
        command: r.command === null ? null : (JSON.parse(r.command) as string[]),
        tokenHash: Buffer.from(r.token_hash),
        createdAtMs: r.created_at_ms,
        createdBy: r.created_by,
        lastDispatchAtMs: r.last_dispatch_at_ms,
      });
    }
    for (const r of this.#db.prepare('SELECT * FROM missions ORDER BY created_at_ms, id').all() as MissionRow[]) {
      let rec: MissionRecord = {
        id: r.id,
        sessionId: r.session_id,
        executorId: r.executor_id,
        agentId: r.agent_id,
        objective: r.objective,
        completion: r.completion,
        longRunning: r.long_running === 1,
        metadata: JSON.parse(r.metadata) as Record<string, unknown>,
        status: r.status as MissionStatus,
        commandId: r.command_id,
        createdAtMs: r.created_at_ms,
        startedAtMs: r.started_at_ms,
        finishedAtMs: r.finished_at_ms,
        exitCode: r.exit_code,
        reason: r.reason,
        error: r.error,
      };
      if (!isTerminal(rec.status)) {
        const atMs = this.#now();
        rec = {
          ...rec,
          status: 'failed',
          finishedAtMs: atMs,
          reason: 'server_restarted',
          error: 'sandboxd restarted while the mission was running',
        };
        this.#writeMission(rec);
        this.#restarted.push(rec);
      }
      this.#missions.set(rec.id, rec);
    }
  }

  /** Missions this open marked failed (server_restarted), for their mission.failed events. */
  restartedFailures(): readonly MissionRecord[] {
    return this.#restarted;
  }

  executors(): ExecutorRecord[] {
    return [...this.#executors.values()];
  }

  executor(id: string): ExecutorRecord | undefined {
    return this.#executors.get(id);
  }

  putExecutor(rec: ExecutorRecord): void {
    this.#putExecutor.run(
      rec.id,
      rec.agentId,
      rec.name,
      JSON.stringify(rec.capabilities),
      rec.command === null ? null : JSON.stringify(rec.command),
      rec.tokenHash,
      rec.createdAtMs,
      rec.createdBy,
      rec.lastDispatchAtMs,
    );
    this.#executors.set(rec.id, rec);
  }

  deleteExecutor(id: string): boolean {
    if (!this.#executors.has(id)) return false;
    this.#deleteExecutor.run(id);
    this.#executors.delete(id);
    return true;
  }

  missions(): MissionRecord[] {
    return [...this.#missions.values()];
  }

  mission(id: string): MissionRecord | undefined {
    return this.#missions.get(id);
  }

  /** Records a new mission (or replaces one whose dispatch failed: a retry of the same id). */
  putMission(rec: MissionRecord): void {
    this.#writeMission(rec);
    this.#missions.delete(rec.id);
    this.#missions.set(rec.id, rec);
  }

  /**
   * Moves mission `id` from one of `from` to `to` through the state machine, with `patch`;
   * returns the new record, or undefined when it was not in `from`.
   */
  moveMission(
    id: string,
    from: readonly MissionStatus[],
    to: MissionStatus,
    cause: string,
    patch: Partial<Omit<MissionRecord, 'id' | 'status'>> = {},
  ): MissionRecord | undefined {
    const cur = this.#missions.get(id);
    if (cur === undefined || !moveMission(id, cur.status, from, to, cause, this.#logger)) return undefined;
    const next: MissionRecord = { ...cur, ...patch, status: to };
    this.#writeMission(next);
    this.#missions.set(id, next);
    return next;
  }

  /** Keeps the newest `max` finished missions (oldest finished ones go first). */
  prune(max: number): void {
    if (this.#missions.size <= max) return;
    for (const m of this.#missions.values()) {
      if (this.#missions.size <= max) return;
      if (!isTerminal(m.status)) continue;
      this.#deleteMission.run(m.id);
      this.#missions.delete(m.id);
    }
  }

  close(): void {
    this.#db.close();
  }

  #writeMission(m: MissionRecord): void {
    this.#putMission.run(
      m.id,
      m.sessionId,
      m.executorId,
      m.agentId,
      m.objective,
      m.completion,
      m.longRunning ? 1 : 0,
      JSON.stringify(m.metadata),
      m.status,
      m.commandId,
      m.createdAtMs,
      m.startedAtMs,
      m.finishedAtMs,
      m.exitCode,
      m.reason,
      m.error,
    );
  }
}
