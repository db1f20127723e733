/**
 * The fleet inventory, durable: one row per workload (desired, observed, last reconcile) and the
 * inventory_revision, in `$SVC_STATE_DIR/fleet/fleet.db` (better-sqlite3, WAL, synchronous=FULL
 * through openDurableDb), every record also held in memory.
 *
 * The revision rule: every change of any workload — desired or observed — is one transaction that
 * raises the stored revision by one and writes the row with that revision. The main thread makes
 * the changes one at a time (a synchronous read-modify-write), so no two changes ever get the same
 * revision and none is lost, however many arrive together; the revision survives restarts and
 * never goes back. A change that changes nothing (an observation equal to the one held) is not a
 * change: no write, no new revision.
 *
 * The store is behind the InventoryStore port so a PostgreSQL implementation can take its place
 * (like the activity store's); this version ships the SQLite one.
 */
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';
import type { WorkloadContent, WorkloadRecord } from './records.js';

export const FLEET_DB_FILE = 'fleet.db';
const kSchemaVersion = 1;

/** The inventory's durable store (the port; SqliteInventoryStore is the implementation). */
export interface InventoryStore {
  /** The current inventory_revision (0 for a new inventory). */
  revision(): number;
  get(name: string): WorkloadRecord | undefined;
  /** Every workload, by name. */
  list(): WorkloadRecord[];
  /**
   * Changes one workload: `change` gets the record held (or undefined) and returns the new content,
   * or null to remove it. Returns the new revision, or null when nothing changed.
   */
  update(name: string, change: (held: WorkloadRecord | undefined) => WorkloadContent | null): number | null;
  /** Whether the first sweep (which adopts the managed domains already there) has run on this store. */
  adopted(): boolean;
  markAdopted(): void;
  /** Called after every change with the new revision and the workload's name. Returns the unsubscribe function. */
  onChange(listener: (revision: number, name: string) => void): () => void;
  close(): void;
}

interface Row {
  name: string;
  content: string;
  revision: number;
}

/** Content equality: records are built with a fixed key order, so their JSON compares them. */
function same(a: WorkloadContent, b: WorkloadContent): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export class SqliteInventoryStore implements InventoryStore {
  readonly dir: string;
  readonly #db: Database.Database;
  readonly #records = new Map<string, WorkloadRecord>();
  readonly #listeners = new Set<(revision: number, name: string) => void>();
  readonly #put: Database.Statement<[string, string, number]>;
  readonly #delete: Database.Statement<[string]>;
  readonly #setMeta: Database.Statement<[string, number]>;
  #revision: number;
  #adopted: boolean;

  /** Opens (creating) `<dir>/fleet.db`. Throws when the directory or the file cannot be used, or is newer. */
  constructor(dir: string) {
    this.dir = dir;
    this.#db = openDurableDb(dir, FLEET_DB_FILE).db;
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion) {
      this.#db.close();
      throw new Error(`${join(dir, FLEET_DB_FILE)} has schema version ${version}, newer than this sandboxd's ${kSchemaVersion}`);
    }
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS workloads (name TEXT PRIMARY KEY, content TEXT NOT NULL, revision INTEGER NOT NULL);
    `);
    this.#db.pragma(`user_version = ${kSchemaVersion}`);
    this.#put = this.#db.prepare('INSERT OR REPLACE INTO workloads (name, content, revision) VALUES (?, ?, ?)');
    this.#delete = this.#db.prepare('DELETE FROM workloads WHERE name = ?');
    this.#setMeta = this.#db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)');
    const meta = new Map(
      (this.#db.prepare('SELECT key, value FROM meta').all() as { key: string; value: number }[]).map((m) => [m.key, m.value]),
    );
    this.#revision = meta.get('revision') ?? 0;
    this.#adopted = meta.get('adopted') === 1;
    for (const r of this.#db.prepare('SELECT name, content, revision FROM workloads ORDER BY name').all() as Row[]) {
      this.#records.set(r.name, { ...(JSON.parse(r.content) as WorkloadContent), name: r.name, revision: r.revision });
    }
  }

  revision(): number {
    return this.#revision;
  }

  get(name: string): WorkloadRecord | undefined {
    return this.#records.get(name);
  }

  list(): WorkloadRecord[] {
    return [...this.#records.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  update(name: string, change: (held: WorkloadRecord | undefined) => WorkloadContent | null): number | null {
    const held = this.#records.get(name);
    const next = change(held);
    if (next === null && held === undefined) return null;
    if (next !== null && held !== undefined && same(contentOf(held), next)) return null;
    const revision = this.#revision + 1;
    this.#db.transaction(() => {
      this.#setMeta.run('revision', revision);
      if (next === null) this.#delete.run(name);
      else this.#put.run(name, JSON.stringify(next), revision);
    })();
    this.#revision = revision;
    if (next === null) this.#records.delete(name);
    else this.#records.set(name, { ...next, name, revision });
    for (const l of this.#listeners) l(revision, name);
    return revision;
  }

  adopted(): boolean {
    return this.#adopted;
  }

  markAdopted(): void {
    this.#setMeta.run('adopted', 1);
    this.#adopted = true;
  }

  onChange(listener: (revision: number, name: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

/** A record without its key and revision (what is compared and stored). */
export function contentOf(r: WorkloadRecord): WorkloadContent {
  return { desired: r.desired, observed: r.observed, lastReconcile: r.lastReconcile };
}
