/**
 * The credential audit log: one record per lease grant, revoke and expiry and per credential
 * proxy call (allowed or denied, with the reason code), in `<SVC_STATE_DIR>/credential-audit.db`
 * (SQLite, WAL, synchronous=FULL: a call that was answered is on disk). Append-only.
 *
 * Records never hold a credential value, a request or response body, header values or a query
 * string: only identifiers, the actor, the resource (lease id / credential name), the action and
 * its outcome, the time and a trace id. `details` keeps a few extra facts for operators reading
 * the file (method, host, path, upstream status); GET /api/v2/credentials/audit never returns it
 * (spec 4.14: "raw details are never returned").
 *
 * Turned off with SVC_CREDENTIAL_AUDIT=off: then no file is written and the route answers
 * `available: false`.
 */
import type Database from 'better-sqlite3';
import { openDurableDb } from '../util/durable-db.js';
import type { CredentialAuditAction, CredentialAuditOutcome, CredentialAuditRecord } from '../wire/credentials.js';

export const CREDENTIAL_AUDIT_DB_FILE = 'credential-audit.db';
/** Spec part 8: at most 200 newest projections per page. */
export const kAuditPageMax = 200;

export type AuditAction = CredentialAuditAction;
export type AuditOutcome = CredentialAuditOutcome;

/** What a component writes. */
export interface AuditEntry {
  readonly action: AuditAction;
  readonly outcome: AuditOutcome;
  /** The error code of a denial or failure; null when allowed. */
  readonly reasonCode: string | null;
  readonly actor: string | null;
  readonly leaseId: string | null;
  readonly credential: string | null;
  readonly agentId: string | null;
  readonly instanceId: string | null;
  readonly sessionId: string | null;
  readonly traceId: string | null;
  /** Extra facts for the file only (never values, bodies or queries). */
  readonly details?: Readonly<Record<string, string | number | null>>;
}

/** The projection GET /api/v2/credentials/audit returns (the wire shape). */
export type AuditProjection = CredentialAuditRecord;

interface Row {
  id: number;
  at_ms: number;
  action: AuditAction;
  outcome: AuditOutcome;
  reason_code: string | null;
  actor: string | null;
  lease_id: string | null;
  credential: string | null;
  agent_id: string | null;
  instance_id: string | null;
  session_id: string | null;
  trace_id: string | null;
}

export class CredentialAuditLog {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #insert: Database.Statement;
  readonly #page: Database.Statement<[number, number, number]>;
  readonly #now: () => number;

  constructor(dir: string, opts: { now?: () => number } = {}) {
    ({ path: this.path, db: this.#db } = openDurableDb(dir, CREDENTIAL_AUDIT_DB_FILE));
    this.#now = opts.now ?? Date.now;
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms INTEGER NOT NULL,
        action TEXT NOT NULL,
        outcome TEXT NOT NULL,
        reason_code TEXT,
        actor TEXT,
        lease_id TEXT,
        credential TEXT,
        agent_id TEXT,
        instance_id TEXT,
        session_id TEXT,
        trace_id TEXT,
        details TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS audit_at ON audit (at_ms);
    `);
    this.#insert = this.#db.prepare(
      `INSERT INTO audit (at_ms, action, outcome, reason_code, actor, lease_id, credential, agent_id, instance_id, session_id, trace_id, details)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.#page = this.#db.prepare(
      `SELECT id, at_ms, action, outcome, reason_code, actor, lease_id, credential, agent_id, instance_id, session_id, trace_id
       FROM audit WHERE at_ms >= ? AND at_ms < ? ORDER BY id DESC LIMIT ?`,
    );
  }

  write(e: AuditEntry): void {
    this.#insert.run(
      this.#now(),
      e.action,
      e.outcome,
      e.reasonCode,
      e.actor,
      e.leaseId,
      e.credential,
      e.agentId,
      e.instanceId,
      e.sessionId,
      e.traceId,
      JSON.stringify(e.details ?? {}),
    );
  }

  /** The newest `limit` (≤ 200) projections of one UTC day (`YYYY-MM-DD`, already validated), newest first. */
  day(date: string, limit = kAuditPageMax): AuditProjection[] {
    const start = Date.parse(`${date}T00:00:00.000Z`);
    const rows = this.#page.all(start, start + 86_400_000, Math.min(limit, kAuditPageMax)) as Row[];
    return rows.map((r) => ({
      id: r.id,
      timestamp: new Date(r.at_ms).toISOString(),
      actor: r.actor,
      action: r.action,
      outcome: r.outcome,
      reason_code: r.reason_code,
      resource: { lease_id: r.lease_id, credential: r.credential },
      correlation: { agent_id: r.agent_id, instance_id: r.instance_id, session_id: r.session_id },
      trace_id: r.trace_id,
    }));
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

/** Whether `date` is a real `YYYY-MM-DD` calendar date. */
export function isUtcDate(date: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  if (m === null) return false;
  const d = new Date(`${date}T00:00:00.000Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === date;
}
