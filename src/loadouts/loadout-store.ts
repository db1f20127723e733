/**
 * The loadout catalog, durable: `$SVC_STATE_DIR/loadouts/loadouts.db` (better-sqlite3, WAL,
 * synchronous=FULL through openDurableDb), every record also held in memory. Create-only: a key
 * is written once (the check and the insert run in one turn of the event loop, so two creates of
 * one key cannot both succeed) and never changed or removed through the API, so a VM's loadout
 * means the same thing for as long as the VM exists.
 */
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { SvcError } from '../core/errors.js';
import { openDurableDb } from '../util/durable-db.js';
import { parseLoadout, type Loadout } from './loadout-record.js';

export const LOADOUTS_DB_FILE = 'loadouts.db';
const kSchemaVersion = 1;

export class LoadoutStore {
  readonly #db: Database.Database;
  readonly #byName = new Map<string, Loadout>();
  readonly #insert: Database.Statement<[string, string, number]>;

  /** Opens (creating) `<dir>/loadouts.db`. Throws when the file cannot be used or is newer. */
  constructor(dir: string) {
    this.#db = openDurableDb(dir, LOADOUTS_DB_FILE).db;
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion) {
      this.#db.close();
      throw new Error(`${join(dir, LOADOUTS_DB_FILE)} has schema version ${version}, newer than this sandboxd's ${kSchemaVersion}`);
    }
    this.#db.exec('CREATE TABLE IF NOT EXISTS loadouts (name TEXT PRIMARY KEY, document TEXT NOT NULL, created_at_ms INTEGER NOT NULL)');
    this.#db.pragma(`user_version = ${kSchemaVersion}`);
    this.#insert = this.#db.prepare('INSERT INTO loadouts (name, document, created_at_ms) VALUES (?, ?, ?)');
    const rows = this.#db.prepare('SELECT name, document, created_at_ms FROM loadouts ORDER BY name').all() as {
      name: string;
      document: string;
      created_at_ms: number;
    }[];
    // Stored documents passed these checks when they were created; they are parsed again (not trusted as JSON).
    for (const r of rows) this.#byName.set(r.name, parseLoadout(r.document, r.name, r.created_at_ms));
  }

  /** Parses, checks and stores `text` under `name`; loadout.exists when the key is taken. */
  create(name: string, text: string, nowMs = Date.now()): Loadout {
    const loadout = parseLoadout(text, name, nowMs);
    if (this.#byName.has(name)) throw new SvcError('loadout.exists', `a loadout named ${name} exists; loadouts are create-only`);
    this.#insert.run(name, text, nowMs);
    this.#byName.set(name, loadout);
    return loadout;
  }

  get(name: string): Loadout | undefined {
    return this.#byName.get(name);
  }

  has(name: string): boolean {
    return this.#byName.has(name);
  }

  /** Every loadout, by name. */
  list(): Loadout[] {
    return [...this.#byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
