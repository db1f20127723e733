/**
 * The SSH lease store: every lease ever issued, durable in `<SVC_STATE_DIR>/gateway-ssh/ssh-leases.db`
 * (openDurableDb: own 0700 directory, file 0600, WAL, synchronous=FULL), and the lifecycle of the
 * active ones on the core state machine. Provided to other components as the `sshLeases` service;
 * the SSH connector asks {@link SshLeaseStore.findActive} whether an actor holds a lease for an
 * instance.
 *
 * Only active leases are held in memory (with their state machine); ended ones are read from
 * SQLite, so memory does not grow with history. Expiry: one timer armed for the earliest
 * expires_at, plus a check on every read, so a lease is never reported active past expires_at
 * even when the timer is late.
 *
 * What is stored is the lease record (src/wire/ssh-leases.ts): the key's fingerprint, never its
 * body; the certificate's key id and fingerprint, never the certificate. Issue, revoke and expiry
 * each write a `gateway_ssh_lease.*` record to the credential audit log when one is configured.
 */
import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import type { Logger } from 'pino';
import { SvcError } from '../../core/errors.js';
import { StateMachine } from '../../core/state-machine.js';
import type { AuditEntry } from '../../credentials/audit-log.js';
import { openDurableDb } from '../../util/durable-db.js';
import {
  REVOCATION_EFFECT,
  SSH_LEASE_ID_PREFIX,
  SSH_LEASE_TABLE,
  SshLeaseCause,
  type SshAccessMode,
  type SshLeaseRecord,
  type SshLeaseState,
} from './lease-types.js';
import { ExpiryTimer } from '../../util/expiry-timer.js';

export type { SshLeaseRecord };
export const SSH_LEASES_DB_FILE = 'ssh-leases.db';

/** Where audit records go (the credential audit log's write). */
export interface SshLeaseAuditSink {
  write(e: AuditEntry): void;
}

export interface SshLeaseStoreOptions {
  /** The store's own directory (created 0700). */
  readonly dir: string;
  readonly logger: Logger;
  readonly audit: SshLeaseAuditSink | null;
  /** Clock, Unix ms. Default Date.now. */
  readonly now?: () => number;
}

/** What issue records: everything but the state, which starts active. */
export interface SshLeaseIssue {
  readonly id: string;
  readonly actor: string;
  readonly instanceId: string;
  readonly principal: string;
  readonly accessMode: SshAccessMode;
  readonly publicKeySha256: string;
  /** Whole seconds (the certificate's valid-after), Unix ms. */
  readonly issuedAtMs: number;
  readonly ttlSeconds: number;
  /** The signed certificate's key id and fingerprint; null when nothing was signed. */
  readonly certificate: { readonly keyId: string; readonly sha256: string } | null;
  /** W3C trace id of the request, for the audit record. */
  readonly traceId?: string | null;
}

export interface SshLeaseFilter {
  readonly state?: SshLeaseState;
  readonly actor?: string;
  readonly instanceId?: string;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** A new lease id: `sshlease_` and 32 hex digits. */
export function newSshLeaseId(): string {
  return `${SSH_LEASE_ID_PREFIX}${randomBytes(16).toString('hex')}`;
}

export class SshLeaseStore {
  readonly path: string;
  readonly #o: SshLeaseStoreOptions;
  readonly #now: () => number;
  readonly #db: Database.Database;
  readonly #put: Database.Statement;
  readonly #get: Database.Statement<[string]>;
  /** Active leases only, by id. */
  readonly #active = new Map<string, { record: SshLeaseRecord; machine: StateMachine<SshLeaseState> }>();
  readonly #expiry: ExpiryTimer;

  /** Opens (creating) `<dir>/ssh-leases.db`, loads the active leases and expires those due. */
  constructor(o: SshLeaseStoreOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
    this.#expiry = new ExpiryTimer(() => {
      if (this.#db.open) this.expireDue();
    }, this.#now);
    ({ path: this.path, db: this.#db } = openDurableDb(o.dir, SSH_LEASES_DB_FILE));
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS ssh_leases (
        id TEXT PRIMARY KEY,
        issued_at_ms INTEGER NOT NULL,
        state TEXT NOT NULL,
        actor TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        record TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS ssh_leases_issued ON ssh_leases (issued_at_ms);
      CREATE INDEX IF NOT EXISTS ssh_leases_state ON ssh_leases (state);
    `);
    this.#put = this.#db.prepare(
      'INSERT OR REPLACE INTO ssh_leases (id, issued_at_ms, state, actor, instance_id, record) VALUES (?, ?, ?, ?, ?, ?)',
    );
    this.#get = this.#db.prepare('SELECT record FROM ssh_leases WHERE id = ?');
    for (const row of this.#db.prepare("SELECT record FROM ssh_leases WHERE state = 'active'").all() as { record: string }[]) {
      const record = parse(row.record);
      if (record !== undefined) this.#track(record);
    }
    this.expireDue();
  }

  /** Records a new active lease (durably, before it is returned) and audits it. */
  issue(i: SshLeaseIssue): SshLeaseRecord {
    const record: SshLeaseRecord = {
      id: i.id,
      actor: i.actor,
      instance_id: i.instanceId,
      principal: i.principal,
      access_mode: i.accessMode,
      public_key_sha256: i.publicKeySha256,
      issued_at: iso(i.issuedAtMs),
      expires_at: iso(i.issuedAtMs + i.ttlSeconds * 1000),
      ttl_seconds: i.ttlSeconds,
      state: 'active',
      certificate_key_id: i.certificate?.keyId ?? null,
      certificate_sha256: i.certificate?.sha256 ?? null,
      revoked_at: null,
      revocation_effect: REVOCATION_EFFECT,
    };
    this.#write(record);
    this.#track(record);
    this.#o.logger.info(
      {
        lease: record.id,
        actor: record.actor,
        instance: record.instance_id,
        principal: record.principal,
        key: record.public_key_sha256,
        signed: record.certificate_key_id !== null,
        ttlSeconds: record.ttl_seconds,
      },
      'SSH lease issued',
    );
    this.#audit('gateway_ssh_lease.issue', i.actor, record, { cause: null }, i.traceId ?? null);
    return record;
  }

  /** A lease by id (expired first when due), or undefined. */
  get(id: string): SshLeaseRecord | undefined {
    this.expireDue();
    const active = this.#active.get(id)?.record;
    if (active !== undefined) return active;
    const row = this.#get.get(id) as { record: string } | undefined;
    return row === undefined ? undefined : parse(row.record);
  }

  /** A lease by id; 404 ssh_lease.not_found. */
  require(id: string): SshLeaseRecord {
    const l = this.get(id);
    if (l === undefined) throw new SvcError('ssh_lease.not_found', `no SSH lease ${id}`, { lease_id: id });
    return l;
  }

  /** One page of leases matching `filter`, newest first, and how many match in all. */
  list(filter: SshLeaseFilter, page: { readonly limit: number; readonly offset: number }): { leases: SshLeaseRecord[]; total: number } {
    this.expireDue();
    const where =
      '(@state IS NULL OR state = @state) AND (@actor IS NULL OR actor = @actor) AND (@instance IS NULL OR instance_id = @instance)';
    const params = { state: filter.state ?? null, actor: filter.actor ?? null, instance: filter.instanceId ?? null };
    const total = (this.#db.prepare(`SELECT COUNT(*) AS n FROM ssh_leases WHERE ${where}`).get(params) as { n: number }).n;
    const rows = this.#db
      .prepare(`SELECT record FROM ssh_leases WHERE ${where} ORDER BY issued_at_ms DESC, id DESC LIMIT @limit OFFSET @offset`)
      .all({ ...params, limit: page.limit, offset: page.offset }) as { record: string }[];
    return { leases: rows.map((r) => parse(r.record)).filter((r): r is SshLeaseRecord => r !== undefined), total };
  }

  /**
   * Revokes an active lease (the record stays, state revoked, revoked_at set); a lease already
   * ended is returned as it is. 404 ssh_lease.not_found.
   */
  revoke(id: string, actor: string, traceId: string | null = null): SshLeaseRecord {
    const l = this.require(id);
    if (l.state === 'active') this.#end(id, 'revoked', SshLeaseCause.revoked, actor, traceId);
    return this.require(id);
  }

  /**
   * The active lease `actor` holds for `instanceId` at `nowMs` (default now): state active and
   * nowMs before expires_at. With several, the one that expires last. For the SSH connector.
   */
  findActive(actor: string, instanceId: string, nowMs: number = this.#now()): SshLeaseRecord | undefined {
    this.expireDue();
    let best: SshLeaseRecord | undefined;
    for (const { record } of this.#active.values()) {
      if (record.actor !== actor || record.instance_id !== instanceId || Date.parse(record.expires_at) <= nowMs) continue;
      if (Date.parse(record.issued_at) > nowMs) continue;
      if (best === undefined || record.expires_at > best.expires_at) best = record;
    }
    return best;
  }

  /** How many leases are active (metrics, tests). */
  activeCount(): number {
    return this.#active.size;
  }

  /** Moves every active lease whose expires_at passed to expired, then re-arms the timer. */
  expireDue(): void {
    const now = this.#now();
    for (const { record } of [...this.#active.values()]) {
      if (Date.parse(record.expires_at) <= now) this.#end(record.id, 'expired', SshLeaseCause.ttlElapsed, null, null);
    }
    this.#arm();
  }

  /** Stops the expiry timer and closes the database. Idempotent. */
  close(): void {
    this.#expiry.cancel();
    if (this.#db.open) this.#db.close();
  }

  #write(r: SshLeaseRecord): void {
    this.#put.run(r.id, Date.parse(r.issued_at), r.state, r.actor, r.instance_id, JSON.stringify(r));
  }

  #track(record: SshLeaseRecord): void {
    const machine = new StateMachine<SshLeaseState>({
      name: 'ssh lease',
      initial: 'active',
      table: SSH_LEASE_TABLE,
      logger: this.#o.logger,
      logFields: { lease: record.id, instance: record.instance_id },
    });
    this.#active.set(record.id, { record, machine });
    this.#arm();
  }

  #end(id: string, to: 'revoked' | 'expired', cause: string, actor: string | null, traceId: string | null): void {
    const l = this.#active.get(id);
    if (l === undefined || !l.machine.transition(['active'], to, cause)) return;
    const record: SshLeaseRecord = { ...l.record, state: to, revoked_at: to === 'revoked' ? iso(this.#now()) : null };
    this.#write(record);
    this.#active.delete(id);
    this.#audit(to === 'revoked' ? 'gateway_ssh_lease.revoke' : 'gateway_ssh_lease.expire', actor, record, { cause }, traceId);
  }

  #audit(
    action: AuditEntry['action'],
    actor: string | null,
    r: SshLeaseRecord,
    extra: { cause: string | null },
    traceId: string | null,
  ): void {
    this.#o.audit?.write({
      action,
      outcome: 'allowed',
      reasonCode: null,
      actor,
      leaseId: r.id,
      credential: null,
      agentId: null,
      instanceId: r.instance_id,
      sessionId: null,
      traceId,
      details: {
        principal: r.principal,
        lease_actor: r.actor,
        public_key_sha256: r.public_key_sha256,
        certificate_key_id: r.certificate_key_id,
        expires_at: r.expires_at,
        cause: extra.cause,
      },
    });
  }

  #arm(): void {
    let next = Infinity;
    for (const { record } of this.#active.values()) next = Math.min(next, Date.parse(record.expires_at));
    this.#expiry.arm(next);
  }
}

function parse(text: string): SshLeaseRecord | undefined {
  try {
    return JSON.parse(text) as SshLeaseRecord;
  } catch {
    // a row that does not parse is skipped: it cannot be used, and nothing else depends on it
    return undefined;
  }
}
