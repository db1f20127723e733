/**
 * The operations' file: `<SVC_STATE_DIR>/operations/operations.db` (better-sqlite3, WAL,
 * synchronous=FULL through openDurableDb: a write that returned is on disk). One row per
 * operation holding its latest persisted snapshot as versioned JSON, plus the columns the purge
 * needs. OperationStore decides what to write and when; this file only reads and writes rows.
 *
 * What a file that cannot be used does (our decision):
 * - missing: created empty;
 * - corrupt (not a SQLite database, or SQLite reports corruption while opening it): renamed aside
 *   to `operations.db.corrupt-<ms>` (with its -wal/-shm) and a fresh file is started, reported to
 *   `onCorrupt` — operations are recent history, kept for SVC_OPERATION_RETENTION_SECONDS, and a
 *   server that refused to start over them would be worse than one that lost them (the old file
 *   stays for inspection);
 * - a schema newer than this build knows (`PRAGMA user_version` > kOperationsSchemaVersion):
 *   opening throws, naming the version: an older sandboxd must not write into a newer file (as
 *   the PostgreSQL activity store);
 * - a row that does not parse or fails validation: skipped at load and reported to `onCorrupt`.
 *
 * Schema versions: 1 — table `operations` (id, status, completed_at_ms, seq, record).
 */
import { existsSync, renameSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { OPERATION_STATUSES, OPERATION_TYPES, type OperationSnapshot } from '../core/operation-state.js';
import { isErrorCode, type WireError } from '../core/errors.js';
import { openDurableDb } from '../util/durable-db.js';
import { errorMessage } from '../util/error-message.js';
import { versionedRecord } from '../util/versioned-record.js';

export const OPERATIONS_DB_FILE = 'operations.db';
/** PRAGMA user_version this code writes (see the file comment). */
export const kOperationsSchemaVersion = 1;
const kRecordVersion = 1;

export interface OperationDbOptions {
  /** A row skipped at load (`id` is the row's key), or the whole file set aside (`id` is its new path). */
  onCorrupt?: (what: 'row' | 'file', id: string, reason: string) => void;
  /** Clock for the name of a set-aside file. */
  now?: () => number;
}

export class OperationDb {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #put: Database.Statement<[string, string, number | null, number, string]>;
  readonly #del: Database.Statement<[string]>;
  readonly #purge: Database.Statement<[number]>;
  readonly #onCorrupt: OperationDbOptions['onCorrupt'];

  /** Opens (creating) `<dir>/operations.db`. Throws when the directory is unusable or the schema is newer. */
  constructor(dir: string, opts: OperationDbOptions = {}) {
    let opened: { path: string; db: Database.Database };
    try {
      opened = openChecked(dir);
    } catch (err) {
      if (!isCorruptionError(err)) throw err;
      const path = `${dir}/${OPERATIONS_DB_FILE}`;
      const aside = `${path}.corrupt-${(opts.now ?? Date.now)()}`;
      for (const suffix of ['', '-wal', '-shm']) if (existsSync(path + suffix)) renameSync(path + suffix, aside + suffix);
      opts.onCorrupt?.('file', aside, errorMessage(err));
      opened = openChecked(dir);
    }
    ({ path: this.path, db: this.#db } = opened);
    this.#put = this.#db.prepare('INSERT OR REPLACE INTO operations (id, status, completed_at_ms, seq, record) VALUES (?, ?, ?, ?, ?)');
    this.#del = this.#db.prepare('DELETE FROM operations WHERE id = ?');
    this.#purge = this.#db.prepare('DELETE FROM operations WHERE completed_at_ms IS NOT NULL AND completed_at_ms <= ?');
    this.#onCorrupt = opts.onCorrupt;
  }

  /** Every valid stored operation; invalid rows are reported to `onCorrupt` and deleted. */
  loadAll(): OperationSnapshot[] {
    const rows = this.#db.prepare('SELECT id, record FROM operations').all() as { id: string; record: string }[];
    const out: OperationSnapshot[] = [];
    const bad: string[] = [];
    for (const row of rows) {
      const s = parseRecord(row.record, row.id);
      if (typeof s !== 'string') out.push(s);
      else {
        this.#onCorrupt?.('row', row.id, s);
        bad.push(row.id);
      }
    }
    this.delete(bad);
    return out;
  }

  /** Writes snapshots (each replacing its operation's row), all in one transaction. */
  put(snapshots: readonly OperationSnapshot[]): void {
    if (snapshots.length === 0) return;
    this.#db.transaction(() => {
      for (const s of snapshots) this.#put.run(s.id, s.status, s.completedAtMs, s.seq, JSON.stringify({ v: kRecordVersion, ...s }));
    })();
  }

  /** Deletes operations by id (eviction, and rows that cannot be read). */
  delete(ids: readonly string[]): void {
    if (ids.length === 0) return;
    this.#db.transaction(() => {
      for (const id of ids) this.#del.run(id);
    })();
  }

  /** Deletes the finished operations that finished at or before `cutoffMs`. Returns how many. */
  purgeFinishedBefore(cutoffMs: number): number {
    return this.#purge.run(cutoffMs).changes;
  }

  /** The schema version of the open file. */
  get schemaVersion(): number {
    return this.#db.pragma('user_version', { simple: true }) as number;
  }

  /** Closes the file; idempotent. */
  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

/** Opens the file, refuses a newer schema, creates version 1 in an empty one. */
function openChecked(dir: string): { path: string; db: Database.Database } {
  const opened = openDurableDb(dir, OPERATIONS_DB_FILE);
  const { db } = opened;
  try {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > kOperationsSchemaVersion) {
      throw new Error(
        `${opened.path}: its schema is at version ${version}, newer than this sandboxd knows (${kOperationsSchemaVersion}): run a newer sandboxd, or move the file away to start with no operations`,
      );
    }
    db.transaction(() => {
      db.exec(`
        CREATE TABLE IF NOT EXISTS operations (
          id TEXT PRIMARY KEY,
          status TEXT NOT NULL,
          completed_at_ms INTEGER,
          seq INTEGER NOT NULL,
          record TEXT NOT NULL
        );
      `);
      db.pragma(`user_version = ${kOperationsSchemaVersion}`);
    })();
    // Reads every page: corruption past the header shows here, at open, not at the first write.
    const check = db.pragma('quick_check', { simple: true }) as string;
    if (check !== 'ok') throw Object.assign(new Error(`quick_check: ${check}`), { code: 'SQLITE_CORRUPT' });
  } catch (err) {
    db.close();
    throw err;
  }
  return opened;
}

function isCorruptionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT';
}

const NON_NEGATIVE = ['createdAtMs', 'progressPercent', 'seq'] as const;

/** A stored row → snapshot, or the reason it is rejected. */
function parseRecord(text: string, id: string): OperationSnapshot | string {
  const o = versionedRecord(text, kRecordVersion);
  if (typeof o === 'string') return o;
  if (o['id'] !== id) return 'bad id';
  if (!(OPERATION_TYPES as readonly unknown[]).includes(o['type'])) return 'bad type';
  if (!(OPERATION_STATUSES as readonly unknown[]).includes(o['status'])) return 'bad status';
  if (typeof o['target'] !== 'string') return 'bad target';
  for (const f of NON_NEGATIVE) if (!Number.isSafeInteger(o[f]) || (o[f] as number) < 0) return `bad ${f}`;
  if ((o['progressPercent'] as number) > 100) return 'bad progressPercent';
  const completed = o['completedAtMs'];
  if (completed !== null && (!Number.isSafeInteger(completed) || (completed as number) < 0)) return 'bad completedAtMs';
  const result = o['result'];
  if (result !== null && (typeof result !== 'object' || Array.isArray(result))) return 'bad result';
  const error = o['error'] as Record<string, unknown> | null;
  if (error !== null && (typeof error !== 'object' || typeof error['code'] !== 'string' || typeof error['message'] !== 'string')) {
    return 'bad error';
  }
  return {
    id,
    type: o['type'] as OperationSnapshot['type'],
    target: o['target'],
    status: o['status'] as OperationSnapshot['status'],
    createdAtMs: o['createdAtMs'] as number,
    completedAtMs: completed as number | null,
    progressPercent: o['progressPercent'] as number,
    result: result as Record<string, unknown> | null,
    // A code this build does not know (written by a newer one) reads as server.internal, message kept.
    error:
      error === null ? null : { ...(error as unknown as WireError), code: isErrorCode(error['code']) ? error['code'] : 'server.internal' },
    seq: o['seq'] as number,
  };
}
