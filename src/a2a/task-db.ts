/**
 * The executor task store on disk: `$SVC_STATE_DIR/a2a/tasks.db` (better-sqlite3 through
 * openDurableDb: WAL, synchronous=FULL), written through by A2aTaskStore, which keeps everything
 * in memory too and reads only from there. A task row is written at each change of state; output
 * records are queued and written in one transaction per {@link kFlushIntervalMs} (and when a task
 * ends, and at close), so a busy command costs a commit every quarter second, not one per chunk.
 * Output printed in the last quarter second before a crash may be missing after the restart.
 */
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';

export const A2A_DB_FILE = 'tasks.db';
const kSchemaVersion = 1;
/** Longest time an output record waits in memory before it is committed (ms). */
export const kFlushIntervalMs = 250;

/** A task row. */
export interface TaskRow {
  readonly id: string;
  readonly instance_id: string;
  readonly context_id: string;
  readonly created_at: string;
  readonly updated_at: string;
  readonly text: string;
  readonly message_id: string;
  readonly command_id: string;
  readonly state: string;
  readonly exit_code: number | null;
  readonly reason: string;
  readonly output_bytes: number;
  readonly truncated: number;
}

/** An output record row: `data` is the raw bytes. */
export interface ArtifactRow {
  readonly artifact_id: string;
  readonly task_id: string;
  readonly seq: number;
  readonly created_at: string;
  readonly kind: string;
  readonly stream: string;
  readonly data: Buffer;
  readonly command_id: string;
}

export class A2aTaskDb {
  readonly #db: Database.Database;
  readonly #putTask: Database.Statement<TaskRow>;
  readonly #putArtifact: Database.Statement<ArtifactRow>;
  readonly #deleteTask: Database.Statement<[string]>;
  readonly #deleteArtifacts: Database.Statement<[string]>;
  #queue: ArtifactRow[] = [];
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  /** Opens (creating) `<dir>/tasks.db`. Throws when the directory or the file cannot be used, or is newer. */
  constructor(dir: string) {
    this.#db = openDurableDb(dir, A2A_DB_FILE).db;
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion) {
      this.#db.close();
      throw new Error(`${join(dir, A2A_DB_FILE)} has schema version ${version}, newer than this sandboxd's ${kSchemaVersion}`);
    }
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS tasks (
        ord INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, instance_id TEXT NOT NULL,
        context_id TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, text TEXT NOT NULL,
        message_id TEXT NOT NULL, command_id TEXT NOT NULL, state TEXT NOT NULL, exit_code INTEGER,
        reason TEXT NOT NULL, output_bytes INTEGER NOT NULL, truncated INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS artifacts (
        artifact_id TEXT PRIMARY KEY, task_id TEXT NOT NULL, seq INTEGER NOT NULL, created_at TEXT NOT NULL,
        kind TEXT NOT NULL, stream TEXT NOT NULL, data BLOB NOT NULL, command_id TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS artifacts_task ON artifacts (task_id, seq);
    `);
    this.#db.pragma(`user_version = ${kSchemaVersion}`);
    this.#putTask = this.#db.prepare(
      `INSERT INTO tasks (id, instance_id, context_id, created_at, updated_at, text, message_id, command_id, state, exit_code, reason, output_bytes, truncated)
       VALUES (@id, @instance_id, @context_id, @created_at, @updated_at, @text, @message_id, @command_id, @state, @exit_code, @reason, @output_bytes, @truncated)
       ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at, state = excluded.state, exit_code = excluded.exit_code,
         reason = excluded.reason, output_bytes = excluded.output_bytes, truncated = excluded.truncated`,
    );
    this.#putArtifact = this.#db.prepare(
      `INSERT OR REPLACE INTO artifacts (artifact_id, task_id, seq, created_at, kind, stream, data, command_id)
       VALUES (@artifact_id, @task_id, @seq, @created_at, @kind, @stream, @data, @command_id)`,
    );
    this.#deleteTask = this.#db.prepare('DELETE FROM tasks WHERE id = ?');
    this.#deleteArtifacts = this.#db.prepare('DELETE FROM artifacts WHERE task_id = ?');
  }

  /** Every task, oldest first, with its records in order. */
  load(): { task: TaskRow; artifacts: ArtifactRow[] }[] {
    const tasks = this.#db.prepare('SELECT * FROM tasks ORDER BY ord').all() as TaskRow[];
    const byTask = this.#db.prepare('SELECT * FROM artifacts WHERE task_id = ? ORDER BY seq');
    return tasks.map((task) => ({ task, artifacts: byTask.all(task.id) as ArtifactRow[] }));
  }

  /** Writes a task row now (its queued output first, so the row never counts bytes not yet stored). */
  putTask(row: TaskRow): void {
    if (this.#closed) return;
    this.flush();
    this.#putTask.run(row);
  }

  /** Queues an output record (committed within kFlushIntervalMs). */
  putArtifact(row: ArtifactRow): void {
    if (this.#closed) return;
    this.#queue.push(row);
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.flush(), kFlushIntervalMs);
      this.#timer.unref();
    }
  }

  /** Forgets an evicted task and its records. */
  deleteTask(id: string): void {
    if (this.#closed) return;
    this.flush();
    this.#db.transaction(() => {
      this.#deleteArtifacts.run(id);
      this.#deleteTask.run(id);
    })();
  }

  /** Commits the queued output records in one transaction. */
  flush(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#closed || this.#queue.length === 0) return;
    const rows = this.#queue;
    this.#queue = [];
    this.#db.transaction(() => {
      for (const r of rows) this.#putArtifact.run(r);
    })();
  }

  /** Flushes and closes. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.#db.close();
  }
}
