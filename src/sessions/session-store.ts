/**
 * Durable state of the sessions component: the session registry's records (Idempotency-Key
 * bindings live in src/idempotency since schema 2). One SQLite file,
 * `<dir>/sessions.db` (better-sqlite3, WAL, synchronous=FULL: a mutation that returned is on
 * disk, DESIGN "durable store"). The directory is created 0700.
 *
 * Every write is one small transaction on the calling thread (an fsync of the WAL, typically
 * well under a few ms). Writes happen on session create, state change, re-attach and close:
 * rare events, never per output chunk.
 *
 * Rows hold JSON with a version field; a row that does not parse or fails validation is skipped
 * at load (and reported to `onCorrupt`) instead of failing the start.
 *
 * Schema versions (`PRAGMA user_version`), migrated in order at open, each in one transaction:
 *   0 → 1  columns `session_backend` (default 'tmux') and `session_class` (default 'managed'):
 *          rows written before keep working as the tmux/managed sessions they are. The columns
 *          are what load reads; the JSON keeps a copy, so an older sandboxd skips a screen or
 *          native row ('bad kind') instead of taking it for tmux.
 *   1 → 2  the `idempotency` table goes: the bindings of POST /api/v1/agents/{id}/sessions moved to
 *          the server's one Idempotency-Key store (src/idempotency). Bindings made before the
 *          upgrade are not carried over (they would have expired within 24 hours).
 */
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';
import { sessionBackendPlan } from './session-backends.js';
import { SESSION_STATES, type SessionBackendName, type SessionClassName, type SessionRecord } from './session-types.js';
import { versionedRecord } from '../util/versioned-record.js';

export const SESSIONS_DB_FILE = 'sessions.db';
const kRecordVersion = 1;
/** PRAGMA user_version this code writes (see the file comment). */
export const kSessionsSchemaVersion = 2;

export interface SessionStoreOptions {
  /** Called for each row skipped at load. */
  onCorrupt?: (what: string, id: string, reason: string) => void;
}

export class SessionStore {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #onCorrupt: SessionStoreOptions['onCorrupt'];
  readonly #put: Database.Statement<[string, string, string, number, string, string]>;
  readonly #del: Database.Statement<[string]>;

  /** Opens (creating) `<dir>/sessions.db`. Throws when the directory or file cannot be used. */
  constructor(dir: string, opts: SessionStoreOptions = {}) {
    ({ path: this.path, db: this.#db } = openDurableDb(dir, SESSIONS_DB_FILE));
    this.#onCorrupt = opts.onCorrupt;
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS sessions (
        session_id TEXT PRIMARY KEY,
        agent_id TEXT NOT NULL,
        record TEXT NOT NULL,
        updated_at_ms INTEGER NOT NULL
      );
    `);
    this.#migrate();
    this.#put = this.#db.prepare(
      'INSERT OR REPLACE INTO sessions (session_id, agent_id, record, updated_at_ms, session_backend, session_class) VALUES (?, ?, ?, ?, ?, ?)',
    );
    this.#del = this.#db.prepare('DELETE FROM sessions WHERE session_id = ?');
  }

  /** Every valid stored session record. */
  loadSessions(): SessionRecord[] {
    const rows = this.#db.prepare('SELECT session_id, record, session_backend, session_class FROM sessions').all() as {
      session_id: string;
      record: string;
      session_backend: string;
      session_class: string;
    }[];
    const out: SessionRecord[] = [];
    for (const row of rows) {
      const rec = parseRecord(row.record, row.session_backend, row.session_class);
      if (typeof rec === 'string') this.#onCorrupt?.('session', row.session_id, rec);
      else out.push(rec);
    }
    return out;
  }

  putSession(r: SessionRecord, nowMs: number = Date.now()): void {
    this.#put.run(r.sessionId, r.agentId, JSON.stringify({ v: kRecordVersion, ...r }), nowMs, r.sessionBackend, r.sessionClass);
  }

  deleteSession(sessionId: string): void {
    this.#del.run(sessionId);
  }

  /** Runs `fn` in one transaction (one fsync for all its writes). */
  batch(fn: () => void): void {
    this.#db.transaction(fn)();
  }

  /** The schema version of the open file. */
  get schemaVersion(): number {
    return this.#db.pragma('user_version', { simple: true }) as number;
  }

  #migrate(): void {
    if (this.schemaVersion >= kSessionsSchemaVersion) return;
    this.#db.transaction(() => {
      const columns = new Set((this.#db.pragma('table_info(sessions)') as { name: string }[]).map((c) => c.name));
      if (!columns.has('session_backend')) this.#db.exec("ALTER TABLE sessions ADD COLUMN session_backend TEXT NOT NULL DEFAULT 'tmux'");
      if (!columns.has('session_class')) this.#db.exec("ALTER TABLE sessions ADD COLUMN session_class TEXT NOT NULL DEFAULT 'managed'");
      this.#db.exec('DROP TABLE IF EXISTS idempotency');
      this.#db.pragma(`user_version = ${kSessionsSchemaVersion}`);
    })();
  }

  /** Closes the database; idempotent. */
  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

const STRING_FIELDS = ['sessionId', 'agentId', 'instanceId', 'commandId', 'sessionName', 'command'] as const;
const COUNT_FIELDS = ['generation', 'createdAtMs', 'cols', 'rows'] as const;

/** A stored row → record, or the reason it is rejected. */
function parseRecord(text: string, backend: string, sessionClass: string): SessionRecord | string {
  const o = versionedRecord(text, kRecordVersion);
  if (typeof o === 'string') return o;
  for (const f of STRING_FIELDS) if (typeof o[f] !== 'string' || (f !== 'command' && o[f] === '')) return `bad ${f}`;
  for (const f of COUNT_FIELDS) if (!Number.isSafeInteger(o[f]) || (o[f] as number) < 0) return `bad ${f}`;
  if (o['sessionType'] !== 'interactive' || sessionBackendPlan(backend, sessionClass) === undefined) return 'bad kind';
  if (!SESSION_STATES.includes(o['state'] as SessionRecord['state'])) return 'bad state';
  return {
    sessionId: o['sessionId'] as string,
    agentId: o['agentId'] as string,
    instanceId: o['instanceId'] as string,
    commandId: o['commandId'] as string,
    generation: o['generation'] as number,
    sessionName: o['sessionName'] as string,
    command: o['command'] as string,
    sessionType: 'interactive',
    sessionBackend: backend as SessionBackendName,
    sessionClass: sessionClass as SessionClassName,
    createdAtMs: o['createdAtMs'] as number,
    state: o['state'] as SessionRecord['state'],
    cols: o['cols'] as number,
    rows: o['rows'] as number,
    // Records written before hub epochs existed had one hub (epoch 0) in the generation that wrote them.
    hubEpoch: Number.isSafeInteger(o['hubEpoch']) && (o['hubEpoch'] as number) >= 0 ? (o['hubEpoch'] as number) : 1,
  };
}
