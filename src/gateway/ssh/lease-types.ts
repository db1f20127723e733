/**
 * Gateway SSH leases: the record (src/wire/ssh-leases.ts, spec part 2) and the lifecycle on the
 * core state machine: `active` → `revoked` (DELETE) | `expired` (its TTL ran out). Both ends are
 * final, and the record stays readable in both (spec part 3). Revoking is metadata only: a
 * certificate already issued stays valid until its valid-before (`revocation_effect`).
 */
import { transitionTableMarkdown, type TransitionTable } from '../../core/state-machine.js';
import type { SshAccessMode, SshLease, SshLeaseState } from '../../wire/ssh-leases.js';

export type { SshAccessMode, SshLeaseState };
export const SSH_LEASE_STATES: readonly SshLeaseState[] = ['active', 'revoked', 'expired'];
export const SSH_ACCESS_MODES: readonly SshAccessMode[] = ['ssh'];
export const SSH_LEASE_ID_PREFIX = 'sshlease_';
export const REVOCATION_EFFECT = 'metadata_only_until_certificate_expiry' as const;

export const SSH_LEASE_TABLE: TransitionTable<SshLeaseState> = {
  active: ['revoked', 'expired'],
  revoked: [],
  expired: [],
};

/** Causes of lease moves (the log line and the audit record's details name them). */
export const SshLeaseCause = {
  revoked: 'revoked',
  ttlElapsed: 'ttl_elapsed',
} as const;

/** A lease as stored and returned. Never holds the key body or the certificate. */
export type SshLeaseRecord = Readonly<SshLease>;

/** README's SSH lease table. */
export function sshLeaseTransitionsMarkdown(): string {
  return transitionTableMarkdown(SSH_LEASE_TABLE, {
    active: {
      revoked: `${SshLeaseCause.revoked} (DELETE /api/v2/gateway/ssh/leases/{id}); the certificate stays valid until expires_at`,
      expired: `${SshLeaseCause.ttlElapsed}: expires_at passed (checked by a timer and on every read)`,
    },
  });
}
