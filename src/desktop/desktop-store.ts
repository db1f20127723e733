/**
 * Managed desktop sessions, durable: `$SVC_STATE_DIR/desktop/desktop.db` (better-sqlite3, WAL,
 * synchronous=FULL through openDurableDb). Every read and write is synchronous on the main
 * thread, so a check and the write that depends on it happen in one turn of the event loop; the
 * writes that must be atomic (resource + authorization policy + idempotency binding; a grant's
 * single use) are also one SQLite transaction or one conditional UPDATE.
 *
 * Grants are stored as their SHA-256 only: the grant itself exists in the 201 response and
 * nowhere else.
 */
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';
import type { DesktopCleanup, DesktopDesired, DesktopObserved, DesktopPolicy } from '../wire/desktop.js';

export const DESKTOP_DB_FILE = 'desktop.db';
const kSchemaVersion = 1;

export interface EnrollmentRecord {
  readonly instanceId: string;
  /** The workspace of the first enrollment: the only one that may re-enroll or use the instance. */
  readonly workspace: string;
  readonly incarnation: string;
  readonly sshAddress: string;
  readonly sshHostKey: string;
  readonly revision: number;
  readonly updatedAtMs: number;
}

export interface ResourceRecord {
  readonly desktopId: string;
  readonly workspace: string;
  readonly subject: string;
  readonly instanceId: string;
  readonly incarnation: string;
  readonly enrollmentRevision: number;
  readonly epochMs: number;
  readonly absoluteExpiresMs: number;
  readonly generation: number;
  readonly desired: DesktopDesired;
  readonly observed: DesktopObserved;
  readonly cleanup: DesktopCleanup;
  readonly fenced: boolean;
  readonly updatedAtMs: number;
}

export interface BindingRecord {
  readonly workspace: string;
  readonly subject: string;
  readonly idempotencyKey: string;
  readonly desktopId: string;
  readonly instanceId: string;
  readonly incarnation: string;
  readonly enrollmentRevision: number;
}

export type GrantAction = 'attach' | 'reconnect';

export interface GrantRecord {
  readonly desktopId: string;
  readonly action: GrantAction;
  /** The resource's generation when the grant was issued: a close (new generation) voids it. */
  readonly generation: number;
  readonly expiresAtMs: number;
}

interface ResourceRow {
  desktop_id: string;
  workspace: string;
  subject: string;
  instance_id: string;
  incarnation: string;
  enrollment_revision: number;
  epoch_ms: number;
  absolute_expires_ms: number;
  generation: number;
  desired: string;
  observed: string;
  cleanup: string;
  fenced: number;
  updated_at_ms: number;
}

const toResource = (r: ResourceRow): ResourceRecord => ({
  desktopId: r.desktop_id,
  workspace: r.workspace,
  subject: r.subject,
  instanceId: r.instance_id,
  incarnation: r.incarnation,
  enrollmentRevision: r.enrollment_revision,
  epochMs: r.epoch_ms,
  absoluteExpiresMs: r.absolute_expires_ms,
  generation: r.generation,
  desired: r.desired as DesktopDesired,
  observed: r.observed as DesktopObserved,
  cleanup: r.cleanup as DesktopCleanup,
  fenced: r.fenced === 1,
  updatedAtMs: r.updated_at_ms,
});

export class DesktopStore {
  readonly #db: Database.Database;

  /** Opens (creating) `<dir>/desktop.db`. Throws when the directory or the file cannot be used, or is newer. */
  constructor(dir: string) {
    this.#db = openDurableDb(dir, DESKTOP_DB_FILE).db;
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version > kSchemaVersion) {
      this.#db.close();
      throw new Error(`${join(dir, DESKTOP_DB_FILE)} has schema version ${version}, newer than this sandboxd's ${kSchemaVersion}`);
    }
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS enrollments (
        instance_id TEXT PRIMARY KEY, workspace TEXT NOT NULL, incarnation TEXT NOT NULL,
        ssh_address TEXT NOT NULL, ssh_host_key TEXT NOT NULL, revision INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS resources (
        desktop_id TEXT PRIMARY KEY, workspace TEXT NOT NULL, subject TEXT NOT NULL, instance_id TEXT NOT NULL,
        incarnation TEXT NOT NULL, enrollment_revision INTEGER NOT NULL, epoch_ms INTEGER NOT NULL,
        absolute_expires_ms INTEGER NOT NULL, generation INTEGER NOT NULL, desired TEXT NOT NULL,
        observed TEXT NOT NULL, cleanup TEXT NOT NULL, fenced INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS policies (
        desktop_id TEXT PRIMARY KEY REFERENCES resources(desktop_id), workspace TEXT NOT NULL,
        subject TEXT NOT NULL, policy TEXT NOT NULL
      );
      CREATE TABLE IF NOT EXISTS bindings (
        workspace TEXT NOT NULL, subject TEXT NOT NULL, idempotency_key TEXT NOT NULL,
        desktop_id TEXT NOT NULL REFERENCES resources(desktop_id), instance_id TEXT NOT NULL,
        incarnation TEXT NOT NULL, enrollment_revision INTEGER NOT NULL, created_at_ms INTEGER NOT NULL,
        PRIMARY KEY (workspace, subject, idempotency_key)
      );
      CREATE TABLE IF NOT EXISTS grants (
        grant_sha256 TEXT PRIMARY KEY, desktop_id TEXT NOT NULL, action TEXT NOT NULL,
        generation INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL, used_at_ms INTEGER
      );
    `);
    this.#db.pragma(`user_version = ${kSchemaVersion}`);
    this.#db.pragma('foreign_keys = ON');
  }

  enrollment(instanceId: string): EnrollmentRecord | undefined {
    const r = this.#db.prepare('SELECT * FROM enrollments WHERE instance_id = ?').get(instanceId) as
      | {
          instance_id: string;
          workspace: string;
          incarnation: string;
          ssh_address: string;
          ssh_host_key: string;
          revision: number;
          updated_at_ms: number;
        }
      | undefined;
    if (r === undefined) return undefined;
    return {
      instanceId: r.instance_id,
      workspace: r.workspace,
      incarnation: r.incarnation,
      sshAddress: r.ssh_address,
      sshHostKey: r.ssh_host_key,
      revision: r.revision,
      updatedAtMs: r.updated_at_ms,
    };
  }

  putEnrollment(e: EnrollmentRecord): void {
    this.#db
      .prepare(
        'INSERT OR REPLACE INTO enrollments (instance_id, workspace, incarnation, ssh_address, ssh_host_key, revision, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)',
      )
      .run(e.instanceId, e.workspace, e.incarnation, e.sshAddress, e.sshHostKey, e.revision, e.updatedAtMs);
  }

  binding(workspace: string, subject: string, key: string): BindingRecord | undefined {
    const r = this.#db
      .prepare('SELECT * FROM bindings WHERE workspace = ? AND subject = ? AND idempotency_key = ?')
      .get(workspace, subject, key) as
      { desktop_id: string; instance_id: string; incarnation: string; enrollment_revision: number } | undefined;
    if (r === undefined) return undefined;
    return {
      workspace,
      subject,
      idempotencyKey: key,
      desktopId: r.desktop_id,
      instanceId: r.instance_id,
      incarnation: r.incarnation,
      enrollmentRevision: r.enrollment_revision,
    };
  }

  /** Inserts the resource, its authorization policy and its idempotency binding in one transaction. */
  insertResource(resource: ResourceRecord, policy: DesktopPolicy, key: string): void {
    this.#db.transaction(() => {
      const r = resource;
      this.#db
        .prepare(
          `INSERT INTO resources (desktop_id, workspace, subject, instance_id, incarnation, enrollment_revision, epoch_ms,
             absolute_expires_ms, generation, desired, observed, cleanup, fenced, updated_at_ms)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          r.desktopId,
          r.workspace,
          r.subject,
          r.instanceId,
          r.incarnation,
          r.enrollmentRevision,
          r.epochMs,
          r.absoluteExpiresMs,
          r.generation,
          r.desired,
          r.observed,
          r.cleanup,
          r.fenced ? 1 : 0,
          r.updatedAtMs,
        );
      this.#db
        .prepare('INSERT INTO policies (desktop_id, workspace, subject, policy) VALUES (?, ?, ?, ?)')
        .run(r.desktopId, r.workspace, r.subject, JSON.stringify(policy));
      this.#db
        .prepare(
          `INSERT INTO bindings (workspace, subject, idempotency_key, desktop_id, instance_id, incarnation, enrollment_revision, created_at_ms)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(r.workspace, r.subject, key, r.desktopId, r.instanceId, r.incarnation, r.enrollmentRevision, r.epochMs);
    })();
  }

  resource(desktopId: string): ResourceRecord | undefined {
    const r = this.#db.prepare('SELECT * FROM resources WHERE desktop_id = ?').get(desktopId) as ResourceRow | undefined;
    return r === undefined ? undefined : toResource(r);
  }

  policy(desktopId: string): DesktopPolicy | undefined {
    const r = this.#db.prepare('SELECT policy FROM policies WHERE desktop_id = ?').get(desktopId) as { policy: string } | undefined;
    return r === undefined ? undefined : (JSON.parse(r.policy) as DesktopPolicy);
  }

  updateResource(r: ResourceRecord): void {
    this.#db
      .prepare(
        'UPDATE resources SET generation = ?, desired = ?, observed = ?, cleanup = ?, fenced = ?, updated_at_ms = ? WHERE desktop_id = ?',
      )
      .run(r.generation, r.desired, r.observed, r.cleanup, r.fenced ? 1 : 0, r.updatedAtMs, r.desktopId);
  }

  insertGrant(sha256: string, g: GrantRecord): void {
    this.#db
      .prepare('INSERT INTO grants (grant_sha256, desktop_id, action, generation, expires_at_ms, used_at_ms) VALUES (?, ?, ?, ?, ?, NULL)')
      .run(sha256, g.desktopId, g.action, g.generation, g.expiresAtMs);
  }

  /**
   * Marks the grant used and returns it, when it exists, is unused and not expired at `nowMs`:
   * one conditional UPDATE, so of two redeems of one grant exactly one wins.
   */
  consumeGrant(sha256: string, nowMs: number): GrantRecord | undefined {
    const r = this.#db
      .prepare(
        'UPDATE grants SET used_at_ms = ? WHERE grant_sha256 = ? AND used_at_ms IS NULL AND expires_at_ms > ? RETURNING desktop_id, action, generation, expires_at_ms',
      )
      .get(nowMs, sha256, nowMs) as { desktop_id: string; action: string; generation: number; expires_at_ms: number } | undefined;
    if (r === undefined) return undefined;
    return { desktopId: r.desktop_id, action: r.action as GrantAction, generation: r.generation, expiresAtMs: r.expires_at_ms };
  }

  /** Forgets grants that expired before `beforeMs` (used or not: they can no longer be redeemed). */
  pruneGrants(beforeMs: number): number {
    return this.#db.prepare('DELETE FROM grants WHERE expires_at_ms < ?').run(beforeMs).changes;
  }

  close(): void {
    this.#db.close();
  }
}
