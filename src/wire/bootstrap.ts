/**
 * Wire shapes of secure bootstrap enrollment (spec 4.10; README "Secure bootstrap"), declared once
 * for sandboxd (src/bootstrap) and the agent that enrolls with them (src/guest-agent/enroll.ts).
 *
 *   material file     what sandboxd stages for one agent (0600): the single-use token, where to
 *                     consume it, and the CA to trust while doing so
 *   consume           POST /api/v1/bootstrap-enrollment/consume {token, csr} → the certificate
 *   readiness         GET /api/v2/admin/bootstrap/readiness: the client-safe posture
 */

/** The `schema_version` of a bootstrap material file. */
export const BOOTSTRAP_MATERIAL_SCHEMA = 'sandboxd.bootstrap-material/v1';
/** The `schema_version` of the readiness answer. */
export const BOOTSTRAP_READINESS_SCHEMA = 'sandboxd.bootstrap-readiness/v1';
/** The consume route's path. */
export const BOOTSTRAP_CONSUME_PATH = '/api/v1/bootstrap-enrollment/consume';

/** The staged bootstrap material file (JSON, mode 0600): everything an agent needs to enroll once. */
export interface BootstrapMaterial {
  readonly schema_version: typeof BOOTSTRAP_MATERIAL_SCHEMA;
  /** The raw single-use token (32 random bytes, base64url, 43 characters). The only copy: sandboxd keeps its SHA-256. */
  readonly token: string;
  /** The token's id (uuid): names it in logs and audit records, never grants anything. */
  readonly token_id: string;
  /** Absolute http(s) URL of the consume route. */
  readonly consume_url: string;
  /** sandboxd's CA certificate (PEM): verifies an https consume URL and, afterwards, the gRPC server. */
  readonly ca_pem: string;
  readonly trust_domain: string;
  /** The instance id the certificate will carry (spiffe://<trust_domain>/agent/<instance_id>). */
  readonly instance_id: string;
  /** The agent's name (its VM's name). */
  readonly agent_id: string;
  /** RFC 3339: after this the token is refused (bootstrap.token_expired). */
  readonly expires_at: string;
}

/** POST /api/v1/bootstrap-enrollment/consume body. */
export interface BootstrapConsumeRequest {
  /** The raw token from the material file. */
  readonly token: string;
  /** PEM PKCS#10 certificate signing request over the agent's own ECDSA P-256 key. */
  readonly csr: string;
}

/** POST /api/v1/bootstrap-enrollment/consume answer (200). */
export interface BootstrapConsumeResponse {
  /** The agent's client certificate (PEM) for its CSR's key. */
  readonly certificate_pem: string;
  /** The CA certificate (PEM): what the agent trusts for the gRPC server. */
  readonly ca_pem: string;
  readonly spiffe_id: string;
  readonly instance_id: string;
  readonly agent_id: string;
  /** RFC 3339: the certificate's notAfter. */
  readonly expires_at: string;
}

/** Readiness statuses (spec 4.10): clients treat secure as ready, degraded and failed as fail-closed. */
export type BootstrapStatus = 'secure' | 'disabled' | 'degraded' | 'failed';

/** One code of the stable enrollment error taxonomy. */
export interface BootstrapTaxonomyEntry {
  readonly code: string;
  readonly http_status: number;
  readonly meaning: string;
}

/** GET /api/v2/admin/bootstrap/readiness answer: never PEM, token hashes, keys, CSRs or paths. */
export interface BootstrapReadiness {
  readonly schema_version: typeof BOOTSTRAP_READINESS_SCHEMA;
  readonly status: BootstrapStatus;
  /** Why the status is not secure (plain sentences without paths or secrets); empty when secure. */
  readonly reasons: readonly string[];
  /** True when a CA backs the gRPC agent listener's mTLS and can issue enrollment certificates. */
  readonly grpc_ca_backend_configured: boolean;
  /** The CA backend's class: `local-file-ca` (SECRETS_DIR), or `none` when no CA could be loaded. */
  readonly ca_backend_class: 'local-file-ca' | 'none';
  readonly trust_domain: string;
  readonly trust_bundle: {
    /** RFC 3339 notAfter of the CA certificate; null without a CA. */
    readonly ca_not_after: string | null;
    /** Seconds until then (negative once past); null without a CA. */
    readonly seconds_to_expiry: number | null;
    /** True while more than `fresh_min_seconds` remain. */
    readonly fresh: boolean;
    readonly fresh_min_seconds: number;
  };
  readonly token_store: {
    readonly available: boolean;
    /** Every token still stored (active + consumed + expired + revoked). */
    readonly issued: number;
    readonly active: number;
    readonly consumed: number;
    readonly expired: number;
    readonly revoked: number;
    readonly token_ttl_seconds: number;
  };
  readonly enrollment: {
    readonly consume_path: typeof BOOTSTRAP_CONSUME_PATH;
    readonly accepted_key_types: readonly string[];
    readonly certificate_ttl_seconds: number;
  };
  readonly error_taxonomy: readonly BootstrapTaxonomyEntry[];
}
