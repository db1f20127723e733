/**
 * Where Idempotency-Key bindings are kept: one SQLite file, `<SVC_STATE_DIR>/idempotency/
 * idempotency.db` (better-sqlite3, WAL, synchronous=FULL through openDurableDb: a binding that was
 * answered is on disk, so a replay after a restart or a crash still finds it).
 *
 * A binding is one row, looked up by its primary key (scope, key) on each keyed request; nothing is
 * held in memory. Rows live until `expires_at_ms` (24 hours after the original answered, spec part
 * 8); expired rows are never answered from and are deleted by `sweep` (the component runs it at
 * start and every 10 minutes). Writes are one small transaction on the calling thread, once per
 * keyed mutating request: rare next to the output path.
 *
 * Schema versions (`PRAGMA user_version`): 1 is the first. A file written by a newer sandboxd is
 * refused at open rather than misread.
 */
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';

export const IDEMPOTENCY_DB_FILE = 'idempotency.db';
export const kIdempotencySchemaVersion = 1;

/** The answer a binding replays: exactly what the original request got. */
export interface BoundResponse {
  readonly status: number;
  /** The handler's headers (lower-case names), without Idempotency-Replayed. */
  readonly headers: Readonly<Record<string, string>>;
  readonly contentType: string;
  /** The body as sent. */
  readonly body: Uint8Array;
}

export interface Binding {
  readonly scope: string;
  readonly key: string;
  /** SHA-256 (hex) of the request it answered (see requestHash). */
  readonly requestHash: string;
  readonly response: BoundResponse;
  readonly createdAtMs: number;
  readonly expiresAtMs: number;
}

interface Row {
  scope: string;
  key: string;
  request_hash: string;
  status: number;
  headers: string;
  content_type: string;
  body: Buffer;
  created_at_ms: number;
  expires_at_ms: number;
}

export class BindingStore {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #get: Database.Statement<[string, string, number], Row>;
  readonly #put: Database.Statement<[string, string, string, number, string, string, Uint8Array, number, number]>;
  readonly #sweep: Database.Statement<[number]>;
  readonly #count: Database.Statement<[number], { n: number }>;

  /** Opens (creating) `<dir>/idempotency.db`. Throws when the directory or file cannot be used. */
  constructor(dir: string) {
    ({ path: this.path, db: this.#db } = openDurableDb(dir, IDEMPOTENCY_DB_FILE));
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kIdempotencySchemaVersion) {
      this.#db.close();
      throw new Error(`${this.path} has schema version ${version}, newer than this sandboxd's ${kIdempotencySchemaVersion}`);
    }
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS bindings (
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        status INTEGER NOT NULL,
        headers TEXT NOT NULL,
        content_type TEXT NOT NULL,
        body BLOB NOT NULL,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        PRIMARY KEY (scope, key)
      );
      CREATE INDEX IF NOT EXISTS bindings_expiry ON bindings (expires_at_ms);
    `);
    this.#db.pragma(`user_version = ${kIdempotencySchemaVersion}`);
    this.#get = this.#db.prepare('SELECT * FROM bindings WHERE scope = ? AND key = ? AND expires_at_ms > ?');
    this.#put = this.#db.prepare(
      'INSERT OR REPLACE INTO bindings (scope, key, request_hash, status, headers, content_type, body, created_at_ms, expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    this.#sweep = this.#db.prepare('DELETE FROM bindings WHERE expires_at_ms <= ?');
    this.#count = this.#db.prepare('SELECT count(*) AS n FROM bindings WHERE expires_at_ms > ?');
  }

  /** The unexpired binding of (scope, key), if any. */
  get(scope: string, key: string, nowMs: number): Binding | undefined {
    const r = this.#get.get(scope, key, nowMs);
    if (r === undefined) return undefined;
    return {
      scope: r.scope,
      key: r.key,
      requestHash: r.request_hash,
      response: {
        status: r.status,
        headers: JSON.parse(r.headers) as Record<string, string>,
        contentType: r.content_type,
        body: new Uint8Array(r.body.buffer, r.body.byteOffset, r.body.byteLength),
      },
      createdAtMs: r.created_at_ms,
      expiresAtMs: r.expires_at_ms,
    };
  }

  put(b: Binding): void {
    const { response: res } = b;
    this.#put.run(
      b.scope,
      b.key,
      b.requestHash,
      res.status,
      JSON.stringify(res.headers),
      res.contentType,
      res.body,
      b.createdAtMs,
      b.expiresAtMs,
    );
  }

  /** Deletes expired bindings; returns how many went. */
  sweep(nowMs: number): number {
    return this.#sweep.run(nowMs).changes;
  }

  /** Unexpired bindings held. */
  count(nowMs: number): number {
    return this.#count.get(nowMs)?.n ?? 0;
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

/** Bindings in memory only (a SessionService built without the server's store: tests, tools). */
export class MemoryBindingStore implements Pick<BindingStore, 'get' | 'put'> {
  readonly #rows = new Map<string, Binding>();

  get(scope: string, key: string, nowMs: number): Binding | undefined {
    const b = this.#rows.get(`${scope}\u0000${key}`);
    return b !== undefined && b.expiresAtMs > nowMs ? b : undefined;
  }

  put(b: Binding): void {
    this.#rows.set(`${b.scope}\u0000${b.key}`, b);
  }
}
