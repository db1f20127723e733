/**
 * The bootstrap token store: one SQLite file, `<SVC_STATE_DIR>/bootstrap/bootstrap.db`
 * (better-sqlite3, WAL, synchronous=FULL, through openDurableDb like every store).
 *
 * A row is one single-use token: its id (uuid), the SHA-256 of the raw token (the raw token is
 * never stored), the instance and agent it enrolls, where its material was staged (so revoking
 * can remove the file), and the times it was created, expires, was consumed or revoked (Unix ms).
 * A token's state follows from them, first match wins: consumed, revoked, expired, else active.
 *
 * Single use is one conditional UPDATE (`claim`): of any number of concurrent consumes of one
 * token exactly one changes the row. Rows past their expiry by more than PRUNE_AFTER_MS are
 * deleted (`prune`), so the counts cover the last week.
 */
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';

export const BOOTSTRAP_DB_FILE = 'bootstrap.db';
/** Rows whose expiry is older than this are pruned, ms (7 days). */
export const PRUNE_AFTER_MS = 7 * 86_400_000;

export type TokenState = 'active' | 'consumed' | 'expired' | 'revoked';

export interface TokenRow {
  readonly tokenId: string;
  /** SHA-256 of the raw token (32 bytes). */
  readonly tokenHash: Buffer;
  readonly instanceId: string;
  readonly agentId: string;
  /** Where the material file was staged (never shown in any answer). */
  readonly materialPath: string | null;
  readonly createdAtMs: number;
  readonly expiresAtMs: number;
  readonly consumedAtMs: number | null;
  readonly revokedAtMs: number | null;
}

interface SqlRow {
  token_id: string;
  token_hash: Buffer;
  instance_id: string;
  agent_id: string;
  material_path: string | null;
  created_at_ms: number;
  expires_at_ms: number;
  consumed_at_ms: number | null;
  revoked_at_ms: number | null;
}

/** The state of `row` at `nowMs`. */
export function tokenState(row: TokenRow, nowMs: number): TokenState {
  if (row.consumedAtMs !== null) return 'consumed';
  if (row.revokedAtMs !== null) return 'revoked';
  if (row.expiresAtMs <= nowMs) return 'expired';
  return 'active';
}

export class BootstrapTokenStore {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #stmts: {
    insert: Database.Statement;
    byHash: Database.Statement;
    byId: Database.Statement;
    claim: Database.Statement;
    unclaim: Database.Statement;
    activeOf: Database.Statement;
    revoke: Database.Statement;
    counts: Database.Statement;
    prune: Database.Statement;
  };

  /** Opens (creating) `<dir>/bootstrap.db`; the directory is created 0700. */
  constructor(dir: string) {
    ({ path: this.path, db: this.#db } = openDurableDb(dir, BOOTSTRAP_DB_FILE));
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS tokens (
        token_id TEXT PRIMARY KEY,
        token_hash BLOB NOT NULL UNIQUE,
        instance_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        material_path TEXT,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        consumed_at_ms INTEGER,
        revoked_at_ms INTEGER
      );
      CREATE INDEX IF NOT EXISTS tokens_instance ON tokens (instance_id);
      CREATE INDEX IF NOT EXISTS tokens_expiry ON tokens (expires_at_ms);
    `);
    this.#stmts = {
      insert: this.#db.prepare(
        `INSERT INTO tokens (token_id, token_hash, instance_id, agent_id, material_path, created_at_ms, expires_at_ms)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
      byHash: this.#db.prepare('SELECT * FROM tokens WHERE token_hash = ?'),
      byId: this.#db.prepare('SELECT * FROM tokens WHERE token_id = ?'),
      claim: this.#db.prepare(
        `UPDATE tokens SET consumed_at_ms = ?
         WHERE token_id = ? AND consumed_at_ms IS NULL AND revoked_at_ms IS NULL AND expires_at_ms > ?`,
      ),
      unclaim: this.#db.prepare('UPDATE tokens SET consumed_at_ms = NULL WHERE token_id = ? AND consumed_at_ms = ?'),
      activeOf: this.#db.prepare(
        `SELECT * FROM tokens WHERE instance_id = ? AND consumed_at_ms IS NULL AND revoked_at_ms IS NULL AND expires_at_ms > ?`,
      ),
      revoke: this.#db.prepare(
        'UPDATE tokens SET revoked_at_ms = ? WHERE token_id = ? AND consumed_at_ms IS NULL AND revoked_at_ms IS NULL',
      ),
      counts: this.#db.prepare(
        `SELECT
           SUM(CASE WHEN consumed_at_ms IS NOT NULL THEN 1 ELSE 0 END) AS consumed,
           SUM(CASE WHEN consumed_at_ms IS NULL AND revoked_at_ms IS NOT NULL THEN 1 ELSE 0 END) AS revoked,
           SUM(CASE WHEN consumed_at_ms IS NULL AND revoked_at_ms IS NULL AND expires_at_ms <= @now THEN 1 ELSE 0 END) AS expired,
           SUM(CASE WHEN consumed_at_ms IS NULL AND revoked_at_ms IS NULL AND expires_at_ms > @now THEN 1 ELSE 0 END) AS active
         FROM tokens`,
      ),
      prune: this.#db.prepare('DELETE FROM tokens WHERE expires_at_ms < ?'),
    };
  }

  insert(row: Omit<TokenRow, 'consumedAtMs' | 'revokedAtMs'>): void {
    this.#stmts.insert.run(row.tokenId, row.tokenHash, row.instanceId, row.agentId, row.materialPath, row.createdAtMs, row.expiresAtMs);
  }

  byHash(hash: Buffer): TokenRow | undefined {
    const r = this.#stmts.byHash.get(hash) as SqlRow | undefined;
    return r === undefined ? undefined : fromSql(r);
  }

  byId(tokenId: string): TokenRow | undefined {
    const r = this.#stmts.byId.get(tokenId) as SqlRow | undefined;
    return r === undefined ? undefined : fromSql(r);
  }

  /** Marks the token consumed at `nowMs` if it is active then; true for exactly one caller per token. */
  claim(tokenId: string, nowMs: number): boolean {
    return this.#stmts.claim.run(nowMs, tokenId, nowMs).changes === 1;
  }

  /** Undoes `claim` (the certificate could not be issued): the token is usable again. */
  unclaim(tokenId: string, claimedAtMs: number): void {
    this.#stmts.unclaim.run(tokenId, claimedAtMs);
  }

  /** Revokes every active token of `instanceId`; returns the rows it revoked. */
  revokeInstance(instanceId: string, nowMs: number): TokenRow[] {
    return this.#db.transaction(() => {
      const rows = (this.#stmts.activeOf.all(instanceId, nowMs) as SqlRow[]).map(fromSql);
      return rows.filter((r) => this.#stmts.revoke.run(nowMs, r.tokenId).changes === 1);
    })();
  }

  counts(nowMs: number): Record<TokenState, number> {
    const r = this.#stmts.counts.get({ now: nowMs }) as Partial<Record<TokenState, number | null>>;
    return { active: r.active ?? 0, consumed: r.consumed ?? 0, expired: r.expired ?? 0, revoked: r.revoked ?? 0 };
  }

  /** Deletes rows that expired before `nowMs - PRUNE_AFTER_MS`; returns how many. */
  prune(nowMs: number): number {
    return this.#stmts.prune.run(nowMs - PRUNE_AFTER_MS).changes;
  }

  get open(): boolean {
    return this.#db.open;
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

function fromSql(r: SqlRow): TokenRow {
  return {
    tokenId: r.token_id,
    tokenHash: r.token_hash,
    instanceId: r.instance_id,
    agentId: r.agent_id,
    materialPath: r.material_path,
    createdAtMs: r.created_at_ms,
    expiresAtMs: r.expires_at_ms,
    consumedAtMs: r.consumed_at_ms,
    revokedAtMs: r.revoked_at_ms,
  };
}
