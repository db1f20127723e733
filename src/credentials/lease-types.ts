/**
 * Credential leases: the record routes return (the spec leaves its fields "not shown"; ours below)
 * and the lease lifecycle on the core state machine: `active` → `revoked` (DELETE, or its
 * credential deleted) | `expired` (its TTL ran out). Both ends are final.
 */
import { transitionTableMarkdown, type TransitionTable } from '../core/state-machine.js';
import type { CredentialLease, CredentialLeaseState } from '../wire/credentials.js';

export type { CredentialLeaseState };
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

/** A lease as stored and returned (the wire shape). Never holds the credential's value. */
export type LeaseRecord = Readonly<CredentialLease>;
