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
 * The store is behind the InventoryStore port: with SVC_ACTIVITY_STORE set to a postgres:// URL
 * the inventory lives in that database instead (postgres-inventory-store.ts), like the activity
 * store's events. Both hold every record in memory and share the revision rule (HeldInventory).
 */
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';
import type { WorkloadContent, WorkloadRecord } from './records.js';

export const FLEET_DB_FILE = 'fleet.db';
const kSchemaVersion = 1;

/** The inventory's durable store (the port; SqliteInventoryStore and PostgresInventoryStore implement it). */
export interface InventoryStore {
  /** `sqlite` or `postgres`, for the start-up log line. */
  readonly kind: 'sqlite' | 'postgres';
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
  /**
   * Resolves once every change made so far is durable: at once for SQLite (each change commits
   * before update() returns), when the write-behind queue has reached it for PostgreSQL.
   */
  committed(): Promise<void>;
  /** Changes made but not yet durable (0 for SQLite). */
  backlog(): number;
  close(): Promise<void>;
}

/** One change as it is persisted: the workload's new content (null: removed) and the revision it took. */
export interface InventoryChange {
  readonly name: string;
  readonly content: WorkloadContent | null;
  readonly revision: number;
}

/** What a store loaded at open: the records, the revision, and whether the first sweep adopted. */
export interface HeldState {
  readonly records: readonly WorkloadRecord[];
  readonly revision: number;
  readonly adopted: boolean;
}

/** The state both stores hold in memory, and the revision rule; a subclass makes each change durable. */
export abstract class HeldInventory implements InventoryStore {
  abstract readonly kind: 'sqlite' | 'postgres';
  readonly #records = new Map<string, WorkloadRecord>();
  readonly #listeners = new Set<(revision: number, name: string) => void>();
  #revision: number;
  #adopted: boolean;

  protected constructor(held: HeldState) {
    for (const r of held.records) this.#records.set(r.name, r);
    this.#revision = held.revision;
    this.#adopted = held.adopted;
  }

  /** Persists one change; called before the change is held in memory (a throw leaves it unmade). */
  protected abstract persist(change: InventoryChange): void;
  protected abstract persistAdopted(): void;

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
    this.persist({ name, content: next, revision });
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
    this.persistAdopted();
    this.#adopted = true;
  }

  onChange(listener: (revision: number, name: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  committed(): Promise<void> {
    return Promise.resolve();
  }

  backlog(): number {
    return 0;
  }

  abstract close(): Promise<void>;
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

export class SqliteInventoryStore extends HeldInventory {
  readonly kind = 'sqlite' as const;
  readonly dir: string;
  readonly #db: Database.Database;
  readonly #put: Database.Statement<[string, string, number]>;
  readonly #delete: Database.Statement<[string]>;
  readonly #setMeta: Database.Statement<[string, number]>;

  /** Opens (creating) `<dir>/fleet.db`. Throws when the directory or the file cannot be used, or is newer. */
  constructor(dir: string) {
    const db = openDurableDb(dir, FLEET_DB_FILE).db;
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion) {
      db.close();
      throw new Error(`${join(dir, FLEET_DB_FILE)} has schema version ${version}, newer than this sandboxd's ${kSchemaVersion}`);
    }
    db.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS workloads (name TEXT PRIMARY KEY, content TEXT NOT NULL, revision INTEGER NOT NULL);
    `);
    db.pragma(`user_version = ${kSchemaVersion}`);
    const meta = new Map(
      (db.prepare('SELECT key, value FROM meta').all() as { key: string; value: number }[]).map((m) => [m.key, m.value]),
    );
    const rows = db.prepare('SELECT name, content, revision FROM workloads ORDER BY name').all() as Row[];
    super({
      records: rows.map((r) => recordOf(r.name, r.content, r.revision)),
      revision: meta.get('revision') ?? 0,
      adopted: meta.get('adopted') === 1,
    });
    this.dir = dir;
    this.#db = db;
    this.#put = db.prepare('INSERT OR REPLACE INTO workloads (name, content, revision) VALUES (?, ?, ?)');
    this.#delete = db.prepare('DELETE FROM workloads WHERE name = ?');
    this.#setMeta = db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)');
  }

  protected persist(c: InventoryChange): void {
    this.#db.transaction(() => {
      this.#setMeta.run('revision', c.revision);
      if (c.content === null) this.#delete.run(c.name);
      else this.#put.run(c.name, JSON.stringify(c.content), c.revision);
    })();
  }

  protected persistAdopted(): void {
    this.#setMeta.run('adopted', 1);
  }

  close(): Promise<void> {
    if (this.#db.open) this.#db.close();
    return Promise.resolve();
  }
}

/** A stored row back as a record. */
export function recordOf(name: string, content: string, revision: number): WorkloadRecord {
  return { ...(JSON.parse(content) as WorkloadContent), name, revision };
}

/** A record without its key and revision (what is compared and stored). */
export function contentOf(r: WorkloadRecord): WorkloadContent {
  return { desired: r.desired, observed: r.observed, lastReconcile: r.lastReconcile };
}
