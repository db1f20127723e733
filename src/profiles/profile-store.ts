/**
 * Startup profiles, durable: `$SVC_STATE_DIR/profiles/profiles.db` (better-sqlite3, WAL,
 * synchronous=FULL through openDurableDb), every record also held in memory. Each change is one
 * synchronous write in one turn of the event loop, so a create and a revision check-and-update
 * cannot interleave with another change of the same name. The built-ins (svc-dev, basic) are not
 * stored: they are constants.
 */
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';
import type { ProfileSpec, StartupProfile } from './profile-record.js';

export const PROFILES_DB_FILE = 'profiles.db';
const kSchemaVersion = 1;

interface Row {
  name: string;
  spec: string;
  revision: number;
  created_at_ms: number;
  updated_at_ms: number;
}

export class ProfileStore {
  readonly #db: Database.Database;
  readonly #byName = new Map<string, StartupProfile>();
  readonly #put: Database.Statement<[string, string, number, number, number]>;
  readonly #delete: Database.Statement<[string]>;

  /** Opens (creating) `<dir>/profiles.db`. Throws when the file cannot be used or is newer. */
  constructor(dir: string) {
    this.#db = openDurableDb(dir, PROFILES_DB_FILE).db;
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion) {
      this.#db.close();
      throw new Error(`${join(dir, PROFILES_DB_FILE)} has schema version ${version}, newer than this sandboxd's ${kSchemaVersion}`);
    }
    this.#db.exec(
      'CREATE TABLE IF NOT EXISTS profiles (name TEXT PRIMARY KEY, spec TEXT NOT NULL, revision INTEGER NOT NULL, created_at_ms INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL)',
    );
    this.#db.pragma(`user_version = ${kSchemaVersion}`);
    this.#put = this.#db.prepare(
      'INSERT OR REPLACE INTO profiles (name, spec, revision, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?)',
    );
    this.#delete = this.#db.prepare('DELETE FROM profiles WHERE name = ?');
    for (const r of this.#db.prepare('SELECT * FROM profiles ORDER BY name').all() as Row[]) {
      const spec = JSON.parse(r.spec) as ProfileSpec;
      this.#byName.set(r.name, {
        ...spec,
        name: r.name,
        builtin: false,
        revision: r.revision,
        createdAtMs: r.created_at_ms,
        updatedAtMs: r.updated_at_ms,
      });
    }
  }

  get(name: string): StartupProfile | undefined {
    return this.#byName.get(name);
  }

  list(): StartupProfile[] {
    return [...this.#byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Writes `p` (insert or replace) and holds it. */
  put(p: StartupProfile): void {
    const spec: ProfileSpec = {
      description: p.description,
      vcpus: p.vcpus,
      memoryMiB: p.memoryMiB,
      diskGiB: p.diskGiB,
      image: p.image,
      network: p.network,
      agent: p.agent,
      loadout: p.loadout,
    };
    this.#put.run(p.name, JSON.stringify(spec), p.revision, p.createdAtMs, p.updatedAtMs);
    this.#byName.set(p.name, p);
  }

  delete(name: string): void {
    this.#delete.run(name);
    this.#byName.delete(name);
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
