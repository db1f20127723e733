/**
 * Durable state of the credentials component: credentials (name, injection rule, the value sealed
 * by {@link SecretBox}) and credential leases. One SQLite file, `<SVC_STATE_DIR>/credentials.db`
 * (better-sqlite3, WAL, synchronous=FULL, as the session store). The value column only ever holds
 * AES-256-GCM ciphertext; its key is in SECRETS_DIR, not here.
 */
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';
import type { Sealed } from './secret-box.js';
import type { LeaseRecord } from './lease-types.js';

export const CREDENTIALS_DB_FILE = 'credentials.db';

/** A stored credential row: metadata and the sealed value. */
export interface StoredCredential {
  readonly name: string;
  readonly headerName: string;
  readonly valuePrefix: string;
  readonly sealed: Sealed;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
}

interface CredentialRow {
  name: string;
  header_name: string;
  value_prefix: string;
  nonce: Buffer;
  box: Buffer;
  created_at_ms: number;
  updated_at_ms: number;
}

export class CredentialStore {
  readonly path: string;
  readonly #db: Database.Database;

  /** Opens (creating) `<dir>/credentials.db`; the directory is created 0700. */
  constructor(dir: string) {
    ({ path: this.path, db: this.#db } = openDurableDb(dir, CREDENTIALS_DB_FILE));
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS credentials (
        name TEXT PRIMARY KEY,
        header_name TEXT NOT NULL,
        value_prefix TEXT NOT NULL,
        nonce BLOB NOT NULL,
        box BLOB NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS leases (
        id TEXT PRIMARY KEY,
        credential TEXT NOT NULL,
        state TEXT NOT NULL,
        record TEXT NOT NULL
      );
    `);
  }

  /** Inserts a credential; false when the name is taken. */
  insertCredential(c: StoredCredential): boolean {
    const r = this.#db
      .prepare(
        'INSERT OR IGNORE INTO credentials (name, header_name, value_prefix, nonce, box, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)',
      )
      .run(c.name, c.headerName, c.valuePrefix, c.sealed.nonce, c.sealed.box, c.createdAtMs, c.updatedAtMs);
    return r.changes === 1;
  }

  getCredential(name: string): StoredCredential | undefined {
    const row = this.#db.prepare('SELECT * FROM credentials WHERE name = ?').get(name) as CredentialRow | undefined;
    return row === undefined ? undefined : fromRow(row);
  }

  listCredentials(): StoredCredential[] {
    return (this.#db.prepare('SELECT * FROM credentials ORDER BY name').all() as CredentialRow[]).map(fromRow);
  }

  deleteCredential(name: string): boolean {
    return this.#db.prepare('DELETE FROM credentials WHERE name = ?').run(name).changes === 1;
  }

  putLease(l: LeaseRecord): void {
    this.#db
      .prepare('INSERT OR REPLACE INTO leases (id, credential, state, record) VALUES (?, ?, ?, ?)')
      .run(l.id, l.credential, l.state, JSON.stringify(l));
  }

  /** Every stored lease (rows that do not parse are skipped). */
  loadLeases(): LeaseRecord[] {
    const out: LeaseRecord[] = [];
    for (const row of this.#db.prepare('SELECT record FROM leases').all() as { record: string }[]) {
      try {
        out.push(JSON.parse(row.record) as LeaseRecord);
      } catch {
        // a row that does not parse is skipped: it cannot be used, and nothing else depends on it
      }
    }
    return out;
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

function fromRow(row: CredentialRow): StoredCredential {
  return {
    name: row.name,
    headerName: row.header_name,
    valuePrefix: row.value_prefix,
    sealed: { nonce: row.nonce, box: row.box },
    createdAtMs: row.created_at_ms,
    updatedAtMs: row.updated_at_ms,
  };
}
