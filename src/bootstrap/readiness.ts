/**
 * GET /api/v2/admin/bootstrap/readiness (spec 4.10; README "Secure bootstrap"): the client-safe
 * posture of secure bootstrap, made from facts that are safe to show. It takes no PEM, key, token,
 * hash or path — only the CA's expiry, counts and settings — so none can leak into it.
 *
 * Status, first match wins: `disabled` (SVC_BOOTSTRAP_ENROLLMENT=off), `failed` (no CA, the CA
 * expired, or the token store unreadable), `degraded` (the CA has TRUST_BUNDLE_FRESH_MIN_SECONDS
 * or less left), else `secure`.
 */
import { ERROR_TABLE, type ErrorCode } from '../core/errors.js';
import { AGENT_CERT_TTL_SECONDS } from '../identity/ca.js';
import { BOOTSTRAP_CONSUME_PATH, BOOTSTRAP_READINESS_SCHEMA, type BootstrapReadiness, type BootstrapStatus } from '../wire/bootstrap.js';
import type { TokenState } from './token-store.js';

/** The stable enrollment error taxonomy: every code consume answers with (README table, readiness). */
export const ENROLLMENT_ERROR_CODES = [
  'bootstrap.request_invalid',
  'bootstrap.token_unknown',
  'bootstrap.token_expired',
  'bootstrap.token_revoked',
  'bootstrap.token_consumed',
  'bootstrap.csr_invalid',
  'bootstrap.ca_unavailable',
  'bootstrap.disabled',
  'request.body_too_large',
] as const satisfies readonly ErrorCode[];

/** The trust bundle is fresh while the CA has more than this left, seconds (30 days). */
export const TRUST_BUNDLE_FRESH_MIN_SECONDS = 30 * 86_400;
/** Key types accepted in CSRs (x509.ts verifyCsr). */
export const ACCEPTED_KEY_TYPES: readonly string[] = ['ecdsa-p256'];

export interface ReadinessFacts {
  readonly nowMs: number;
  /** The CA's expiry, or null when no CA is loaded. */
  readonly ca: { readonly caNotAfter: Date } | null;
  readonly enabled: boolean;
  readonly trustDomain: string;
  readonly tokenTtlSeconds: number;
  /** Token-store counts, or null when the store cannot be read. */
  readonly counts: Record<TokenState, number> | null;
}

export function bootstrapReadiness(f: ReadinessFacts): BootstrapReadiness {
  const { ca } = f;
  const secondsToExpiry = ca === null ? null : Math.floor((ca.caNotAfter.getTime() - f.nowMs) / 1000);
  const fresh = secondsToExpiry !== null && secondsToExpiry > TRUST_BUNDLE_FRESH_MIN_SECONDS;
  const counts = f.counts ?? { active: 0, consumed: 0, expired: 0, revoked: 0 };
  let status: BootstrapStatus = 'secure';
  const reasons: string[] = [];
  if (!f.enabled) {
    status = 'disabled';
    reasons.push('bootstrap enrollment is turned off by configuration');
  } else if (ca === null) {
    status = 'failed';
    reasons.push('the CA could not be loaded');
  } else if (secondsToExpiry !== null && secondsToExpiry <= 0) {
    status = 'failed';
    reasons.push('the CA certificate has expired');
  } else if (f.counts === null) {
    status = 'failed';
    reasons.push('the token store is not available');
  } else if (!fresh) {
    status = 'degraded';
    reasons.push(`the CA certificate expires within ${TRUST_BUNDLE_FRESH_MIN_SECONDS / 86_400} days`);
  }
  return {
    schema_version: BOOTSTRAP_READINESS_SCHEMA,
    status,
    reasons,
    grpc_ca_backend_configured: ca !== null,
    ca_backend_class: ca === null ? 'none' : 'local-file-ca',
    trust_domain: f.trustDomain,
    trust_bundle: {
      ca_not_after: ca === null ? null : ca.caNotAfter.toISOString(),
      seconds_to_expiry: secondsToExpiry,
      fresh,
      fresh_min_seconds: TRUST_BUNDLE_FRESH_MIN_SECONDS,
    },
    token_store: {
      available: f.counts !== null,
      issued: counts.active + counts.consumed + counts.expired + counts.revoked,
      ...counts,
      token_ttl_seconds: f.tokenTtlSeconds,
    },
    enrollment: {
      consume_path: BOOTSTRAP_CONSUME_PATH,
      accepted_key_types: ACCEPTED_KEY_TYPES,
      certificate_ttl_seconds: AGENT_CERT_TTL_SECONDS,
    },
    error_taxonomy: ENROLLMENT_ERROR_CODES.map((code) => ({
      code,
      http_status: ERROR_TABLE[code].http,
      meaning: ERROR_TABLE[code].meaning,
    })),
  };
}
