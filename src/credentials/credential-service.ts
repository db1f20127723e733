/**
 * Credentials and their leases: register, list, delete credentials (values write-only, sealed at
 * rest); grant, list, revoke leases; expire them when their TTL runs out (one timer armed for the
 * earliest expiry, plus a check on every use, so a lease is never honoured past expires_at even
 * when the timer is late). Every lease move is logged, counted on the state machine, emitted as an
 * event (`credential.lease_granted|revoked|expired`) and audited. None of these ever carries the
 * value: it leaves this class only through {@link CredentialService.injection}, for the proxy.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { SvcError } from '../core/errors.js';
import { StateMachine } from '../core/state-machine.js';
import type { EventStore } from '../events/event-store.js';
import type { AuditEntry, CredentialAuditLog } from './audit-log.js';
import type { CredentialStore, StoredCredential } from './credential-store.js';
import { CREDENTIAL_LEASE_TABLE, CredentialLeaseCause, type CredentialLeaseState, type LeaseRecord } from './lease-types.js';
import type { CredentialInfo, ProxyPolicy } from '../wire/credentials.js';
import type { SecretBox } from './secret-box.js';
import { ExpiryTimer } from '../util/expiry-timer.js';

export type { CredentialInfo };

export interface LeaseGrant {
  readonly credential: string;
  readonly agentId: string;
  readonly instanceId: string;
  readonly sessionId: string | null;
  readonly ttlSeconds: number;
  readonly policy: ProxyPolicy | null;
  readonly actor: string;
}

export interface CredentialServiceOptions {
  readonly store: CredentialStore;
  readonly box: SecretBox;
  readonly audit: CredentialAuditLog | null;
  readonly events: EventStore | undefined;
  readonly logger: Logger;
  readonly now?: () => number;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export class CredentialService {
  readonly #o: CredentialServiceOptions;
  readonly #now: () => number;
  /** Every lease, by id (active ones carry their state machine). */
  readonly #leases = new Map<string, { record: LeaseRecord; machine: StateMachine<CredentialLeaseState> | null }>();
  readonly #expiry: ExpiryTimer;

  constructor(o: CredentialServiceOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
    this.#expiry = new ExpiryTimer(() => this.expireDue(), this.#now);
    for (const record of o.store.loadLeases()) this.#track(record);
    this.expireDue();
  }

  // ---- credentials

  add(name: string, value: string, headerName: string, valuePrefix: string, actor: string): CredentialInfo {
    const at = this.#now();
    const stored: StoredCredential = {
      name,
      headerName,
      valuePrefix,
      sealed: this.#o.box.seal(name, value),
      createdAtMs: at,
      updatedAtMs: at,
    };
    if (!this.#o.store.insertCredential(stored)) {
      throw new SvcError('credential.already_exists', `a credential named ${name} exists; delete it first to replace it`, { name });
    }
    this.#o.logger.info({ credential: name, actor, headerName }, 'credential registered');
    this.#audit({ action: 'credential.add', outcome: 'allowed', actor, credential: name });
    return this.#info(stored);
  }

  list(): CredentialInfo[] {
    return this.#o.store.listCredentials().map((c) => this.#info(c));
  }

  get(name: string): CredentialInfo {
    return this.#info(this.#stored(name));
  }

  /** Deletes a credential and revokes its active leases; returns how many were revoked. */
  delete(name: string, actor: string): number {
    this.#stored(name);
    let revoked = 0;
    for (const { record } of this.#leases.values()) {
      if (
        record.credential === name &&
        record.state === 'active' &&
        this.#end(record.id, 'revoked', CredentialLeaseCause.credentialDeleted, actor)
      )
        revoked++;
    }
    this.#o.store.deleteCredential(name);
    this.#o.logger.info({ credential: name, actor, revokedLeases: revoked }, 'credential deleted');
    this.#audit({ action: 'credential.delete', outcome: 'allowed', actor, credential: name });
    return revoked;
  }

  /** The header the credential is injected into (no decryption). */
  headerOf(name: string): string {
    return this.#stored(name).headerName;
  }

  /** The header, prefix and value to inject: for the credential proxy only. */
  injection(name: string): { headerName: string; valuePrefix: string; value: string } {
    const c = this.#stored(name);
    return { headerName: c.headerName, valuePrefix: c.valuePrefix, value: this.#o.box.open(c.name, c.sealed) };
  }

  // ---- leases

  grant(g: LeaseGrant): LeaseRecord {
    this.#stored(g.credential);
    const at = this.#now();
    const record: LeaseRecord = {
      id: `credlease_${randomBytes(16).toString('hex')}`,
      credential: g.credential,
      agent_id: g.agentId,
      instance_id: g.instanceId,
      session_id: g.sessionId,
      actor: g.actor,
      ttl_seconds: g.ttlSeconds,
      issued_at: iso(at),
      expires_at: iso(at + g.ttlSeconds * 1000),
      state: 'active',
      revoked_at: null,
      ended_cause: null,
      proxy_policy: g.policy,
    };
    this.#o.store.putLease(record);
    this.#track(record);
    this.#o.logger.info(
      { lease: record.id, credential: g.credential, agent: g.agentId, actor: g.actor, ttlSeconds: g.ttlSeconds },
      'credential lease granted',
    );
    this.#emit('credential.lease_granted', record);
    this.#audit({ action: 'lease.grant', outcome: 'allowed', actor: g.actor, ...scopeOf(record) });
    return record;
  }

  /** A lease by id, expired first when due; 404 credential_lease.not_found. */
  lease(id: string): LeaseRecord {
    this.expireDue();
    const l = this.#leases.get(id);
    if (l === undefined) throw new SvcError('credential_lease.not_found', `no credential lease ${id}`, { lease_id: id });
    return l.record;
  }

  /** A lease by id, or undefined (the proxy reports its own code). */
  findLease(id: string): LeaseRecord | undefined {
    this.expireDue();
    return this.#leases.get(id)?.record;
  }

  leases(filter: { state?: CredentialLeaseState; credential?: string; agentId?: string } = {}): LeaseRecord[] {
    this.expireDue();
    return [...this.#leases.values()]
      .map((l) => l.record)
      .filter(
        (r) =>
          (filter.state === undefined || r.state === filter.state) &&
          (filter.credential === undefined || r.credential === filter.credential) &&
          (filter.agentId === undefined || r.agent_id === filter.agentId),
      )
      .sort((a, b) => (a.issued_at < b.issued_at ? 1 : a.issued_at > b.issued_at ? -1 : 0));
  }

  /** Revokes an active lease; a lease already ended is returned as it is. */
  revoke(id: string, actor: string): LeaseRecord {
    const l = this.lease(id);
    if (l.state === 'active') this.#end(id, 'revoked', CredentialLeaseCause.revoked, actor);
    return this.lease(id);
  }

  /** Moves every active lease whose expires_at passed to expired, then re-arms the timer. */
  expireDue(): void {
    const now = this.#now();
    for (const { record } of this.#leases.values()) {
      if (record.state === 'active' && Date.parse(record.expires_at) <= now)
        this.#end(record.id, 'expired', CredentialLeaseCause.ttlElapsed, null);
    }
    this.#arm();
  }

  stop(): void {
    this.#expiry.cancel();
  }

  // ---- internals

  #track(record: LeaseRecord): void {
    const machine =
      record.state === 'active'
        ? new StateMachine<CredentialLeaseState>({
            name: 'credential lease',
            initial: 'active',
            table: CREDENTIAL_LEASE_TABLE,
            logger: this.#o.logger,
            logFields: { lease: record.id, credential: record.credential },
          })
        : null;
    this.#leases.set(record.id, { record, machine });
    this.#arm();
  }

  #end(id: string, to: 'revoked' | 'expired', cause: string, actor: string | null): boolean {
    const l = this.#leases.get(id);
    if (l?.machine === undefined || l.machine === null || !l.machine.transition(['active'], to, cause)) return false;
    const at = iso(this.#now());
    const record: LeaseRecord = { ...l.record, state: to, ended_cause: cause, revoked_at: to === 'revoked' ? at : null };
    this.#leases.set(id, { record, machine: null });
    this.#o.store.putLease(record);
    this.#emit(to === 'revoked' ? 'credential.lease_revoked' : 'credential.lease_expired', record);
    this.#audit({
      action: to === 'revoked' ? 'lease.revoke' : 'lease.expire',
      outcome: 'allowed',
      actor,
      ...scopeOf(record),
      details: { cause },
    });
    return true;
  }

  #arm(): void {
    let next = Infinity;
    for (const { record } of this.#leases.values()) if (record.state === 'active') next = Math.min(next, Date.parse(record.expires_at));
    this.#expiry.arm(next);
  }

  #stored(name: string): StoredCredential {
    const c = this.#o.store.getCredential(name);
    if (c === undefined) throw new SvcError('credential.not_found', `no credential named ${name}`, { name });
    return c;
  }

  #info(c: StoredCredential): CredentialInfo {
    let active = 0;
    for (const { record } of this.#leases.values()) if (record.credential === c.name && record.state === 'active') active++;
    return {
      name: c.name,
      injection: { header_name: c.headerName, value_prefix: c.valuePrefix },
      created_at: iso(c.createdAtMs),
      updated_at: iso(c.updatedAtMs),
      active_leases: active,
    };
  }

  #emit(type: string, r: LeaseRecord): void {
    this.#o.events?.append({
      event_type: type,
      agent_id: r.agent_id,
      details: {
        lease_id: r.id,
        credential: r.credential,
        instance_id: r.instance_id,
        session_id: r.session_id,
        state: r.state,
        expires_at: r.expires_at,
      },
    });
  }

  #audit(e: Partial<AuditEntry> & Pick<AuditEntry, 'action' | 'outcome'>): void {
    this.#o.audit?.write({
      reasonCode: null,
      actor: null,
      leaseId: null,
      credential: null,
      agentId: null,
      instanceId: null,
      sessionId: null,
      traceId: null,
      ...e,
    });
  }
}

function scopeOf(r: LeaseRecord): Pick<AuditEntry, 'leaseId' | 'credential' | 'agentId' | 'instanceId' | 'sessionId'> {
  return { leaseId: r.id, credential: r.credential, agentId: r.agent_id, instanceId: r.instance_id, sessionId: r.session_id };
}
