/**
 * How every SQLite store of the server opens its file: the store's own directory (0700; never the
 * state directory itself, which QEMU must traverse), the file 0600, WAL with synchronous=FULL (a
 * commit is on disk before it is acknowledged) and a 2 s busy timeout.
 */
import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';

/** Opens (creating) `<dir>/<file>`. Throws when the directory or the file cannot be used. */
export function openDurableDb(dir: string, file: string): { readonly path: string; readonly db: Database.Database } {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const path = join(dir, file);
  const db = new Database(path);
  chmodSync(path, 0o600);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('busy_timeout = 2000');
  return { path, db };
}
