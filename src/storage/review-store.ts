/**
 * Scoped-storage write reviews, durable: `$SVC_STATE_DIR/storage-reviews/reviews.db`
 * (better-sqlite3 through openDurableDb). A pending PUT keeps its bytes (at most 1 MiB) in the
 * row until it is decided; the bytes are dropped when it is. Pending reviews survive a restart
 * and are approved or rejected afterwards like any other.
 */
import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { SvcError } from '../core/errors.js';
import type { TransitionLogger } from '../core/state-machine.js';
import { openDurableDb } from '../util/durable-db.js';
import type { StorageReview } from '../wire/storage.js';
import { moveReview, type ReviewState } from './review-state.js';

export const REVIEWS_DB_FILE = 'reviews.db';
/** Most pending reviews held at once (each may hold 1 MiB): a request beyond is 503 until some are decided. */
export const MAX_PENDING_REVIEWS = 1000;

/** The storage.review/v1 record (src/storage/storage-review-v1.schema.json). */
export type ReviewJson = StorageReview;

export interface NewReview {
  readonly area: 'inbox' | 'outbox';
  readonly owner: string;
  readonly names: readonly string[];
  readonly path: string;
  readonly op: 'put' | 'delete';
  readonly body: Uint8Array | null;
  readonly sha256: string | null;
  readonly expectedEtag: string | null;
  readonly requestedBy: string;
}

interface Row {
  id: string;
  area: 'inbox' | 'outbox';
  owner: string;
  names: string;
  path: string;
  op: 'put' | 'delete';
  state: ReviewState;
  size_bytes: number | null;
  sha256: string | null;
  expected_etag: string | null;
  requested_by: string;
  requested_at_ms: number;
  decided_by: string | null;
  decided_at_ms: number | null;
  result_etag: string | null;
  error_code: string | null;
  error_message: string | null;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export class ReviewStore {
  readonly #db: Database.Database;
  readonly #logger: TransitionLogger | undefined;

  constructor(dir: string, opts: { logger?: TransitionLogger } = {}) {
    this.#db = openDurableDb(dir, REVIEWS_DB_FILE).db;
    this.#logger = opts.logger;
    this.#db.exec(`CREATE TABLE IF NOT EXISTS reviews (
      id TEXT PRIMARY KEY, area TEXT NOT NULL, owner TEXT NOT NULL, names TEXT NOT NULL, path TEXT NOT NULL,
      op TEXT NOT NULL, state TEXT NOT NULL, body BLOB, size_bytes INTEGER, sha256 TEXT, expected_etag TEXT,
      requested_by TEXT NOT NULL, requested_at_ms INTEGER NOT NULL, decided_by TEXT, decided_at_ms INTEGER,
      result_etag TEXT, error_code TEXT, error_message TEXT)`);
    this.#db.exec('CREATE INDEX IF NOT EXISTS reviews_state ON reviews (state, requested_at_ms)');
  }

  close(): void {
    this.#db.close();
  }

  create(r: NewReview): ReviewJson {
    const pending = (this.#db.prepare("SELECT count(*) AS n FROM reviews WHERE state = 'pending'").get() as { n: number }).n;
    if (pending >= MAX_PENDING_REVIEWS) {
      throw new SvcError('server.unavailable', `${pending} storage writes wait for review; approve or reject some first`);
    }
    const id = `srv-${randomUUID()}`;
    this.#db
      .prepare(
        `INSERT INTO reviews (id, area, owner, names, path, op, state, body, size_bytes, sha256, expected_etag, requested_by, requested_at_ms)
         VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        id,
        r.area,
        r.owner,
        JSON.stringify(r.names),
        r.path,
        r.op,
        r.body === null ? null : Buffer.from(r.body),
        r.body === null ? null : r.body.byteLength,
        r.sha256,
        r.expectedEtag,
        r.requestedBy,
        Date.now(),
      );
    return this.get(id);
  }

  /** 404 storage.review_not_found for an unknown id. */
  get(id: string): ReviewJson {
    return toJson(this.#row(id));
  }

  /** The names and the bytes of a pending review (to apply it). */
  payload(id: string): { names: string[]; body: Uint8Array | null } {
    const row = this.#db.prepare('SELECT names, body FROM reviews WHERE id = ?').get(id) as
      { names: string; body: Buffer | null } | undefined;
    if (row === undefined) throw new SvcError('storage.review_not_found', `no storage write review ${id}`);
    return { names: JSON.parse(row.names) as string[], body: row.body };
  }

  /** Newest first, optionally of one state, at most `limit`. */
  list(state: ReviewState | null, limit: number): ReviewJson[] {
    const rows = (
      state === null
        ? this.#db.prepare('SELECT * FROM reviews ORDER BY requested_at_ms DESC, id LIMIT ?').all(limit)
        : this.#db.prepare('SELECT * FROM reviews WHERE state = ? ORDER BY requested_at_ms DESC, id LIMIT ?').all(state, limit)
    ) as Row[];
    return rows.map(toJson);
  }

  /** Move a pending review to its outcome (the bytes are dropped). 409 storage.review_decided when it is not pending. */
  decide(
    id: string,
    to: Exclude<ReviewState, 'pending'>,
    by: string,
    outcome: { resultEtag?: string; error?: { code: string; message: string } } = {},
  ): ReviewJson {
    const row = this.#row(id);
    if (row.state !== 'pending' || !moveReview(id, row.state, to, to, this.#logger)) {
      throw new SvcError('storage.review_decided', `storage write review ${id} is already ${row.state}`);
    }
    this.#db
      .prepare(
        `UPDATE reviews SET state = ?, body = NULL, decided_by = ?, decided_at_ms = ?, result_etag = ?, error_code = ?, error_message = ?
         WHERE id = ? AND state = 'pending'`,
      )
      .run(to, by, Date.now(), outcome.resultEtag ?? null, outcome.error?.code ?? null, outcome.error?.message ?? null, id);
    return this.get(id);
  }

  #row(id: string): Row {
    const row = this.#db.prepare('SELECT * FROM reviews WHERE id = ?').get(id) as Row | undefined;
    if (row === undefined) throw new SvcError('storage.review_not_found', `no storage write review ${id}`);
    return row;
  }
}

function toJson(r: Row): ReviewJson {
  return {
    schema_version: 'storage.review/v1',
    id: r.id,
    area: r.area,
    owner: r.owner,
    path: r.path,
    op: r.op,
    state: r.state,
    size_bytes: r.size_bytes,
    sha256: r.sha256,
    expected_etag: r.expected_etag,
    requested_by: r.requested_by,
    requested_at: iso(r.requested_at_ms) ?? '',
    decided_by: r.decided_by,
    decided_at: iso(r.decided_at_ms),
    result_etag: r.result_etag,
    error: r.error_code === null ? null : { code: r.error_code, message: r.error_message ?? '' },
  };
}
