/**
 * Credential leases: the record routes return (the spec leaves its fields "not shown"; ours below)
 * and the lease lifecycle on the core state machine: `active` → `revoked` (DELETE, or its
 * credential deleted) | `expired` (its TTL ran out). Both ends are final.
 */
import { transitionTableMarkdown, type TransitionTable } from '../core/state-machine.js';
import type { ProxyPolicy } from './policy.js';

export type CredentialLeaseState = 'active' | 'revoked' | 'expired';
export const CREDENTIAL_LEASE_STATES: readonly CredentialLeaseState[] = ['active', 'revoked', 'expired'];

export const CREDENTIAL_LEASE_TABLE: TransitionTable<CredentialLeaseState> = {
  active: ['revoked', 'expired'],
  revoked: [],
  expired: [],
};

/** Causes of lease moves (the event and audit record name them). */
export const CredentialLeaseCause = {
  revoked: 'revoked',
  credentialDeleted: 'credential_deleted',
  ttlElapsed: 'ttl_elapsed',
} as const;

/** README's credential lease table. */
export function credentialLeaseTransitionsMarkdown(): string {
  return transitionTableMarkdown(CREDENTIAL_LEASE_TABLE, {
    active: {
      revoked: `${CredentialLeaseCause.revoked} (DELETE /api/v2/credentials/leases/{id}), ${CredentialLeaseCause.credentialDeleted} (its credential was deleted)`,
      expired: `${CredentialLeaseCause.ttlElapsed}: expires_at passed (checked by a timer and on every use)`,
    },
  });
}

/** A lease as stored and returned. Never holds the credential's value. */
export interface LeaseRecord {
  /** `credlease_<32 hex>`. */
  readonly id: string;
  /** The credential's name. */
  readonly credential: string;
  readonly agent_id: string;
  readonly instance_id: string;
  /** null: any session of that agent and instance. */
  readonly session_id: string | null;
  /** Who granted it (the resolved operator identity). */
  readonly actor: string;
  readonly ttl_seconds: number;
  /** ISO 8601 UTC. */
  readonly issued_at: string;
  readonly expires_at: string;
  readonly state: CredentialLeaseState;
  readonly revoked_at: string | null;
  /** Why it left `active` (a CredentialLeaseCause), null while active. */
  readonly ended_cause: string | null;
  /** null: the lease allows no proxy call (a policyless lease is denied). */
  readonly proxy_policy: ProxyPolicy | null;
}
