/**
 * The HTTP API's wire shapes, declared once: credentials, credential leases, the credential audit
 * and the credential proxy (spec 4.14; README "Credentials and the credential proxy"). A
 * credential's value is write-only: no response shape here carries it.
 * A leaf: imports nothing outside src/wire.
 */

/** A credential as lists and gets return it: never the value. */
export interface CredentialInfo {
  name: string;
  injection: { header_name: string; value_prefix: string };
  created_at: string;
  updated_at: string;
  active_leases: number;
}

export interface CredentialAddRequest {
  name: string;
  value: string;
  injection?: { header_name?: string; value_prefix?: string };
}

/** Which targets a lease allows (src/credentials/policy.ts). */
export interface ProxyPolicy {
  hosts: string[];
  path_prefixes: string[];
  methods: string[];
  header_allowlist: string[];
}

export type CredentialLeaseState = 'active' | 'revoked' | 'expired';

/** A credential lease as every lease route returns it. */
export interface CredentialLease {
  /** `credlease_<32 hex>`. */
  id: string;
  credential: string;
  agent_id: string;
  instance_id: string;
  /** null: any session of that agent and instance. */
  session_id: string | null;
  /** Who granted it (the resolved operator identity). */
  actor: string;
  ttl_seconds: number;
  /** ISO 8601 UTC. */
  issued_at: string;
  expires_at: string;
  state: CredentialLeaseState;
  revoked_at: string | null;
  /** Why it left `active` (revoked, credential_deleted, ttl_elapsed), null while active. */
  ended_cause: string | null;
  /** null: the lease allows no proxy call (a policyless lease is denied). */
  proxy_policy: ProxyPolicy | null;
}

export interface CredentialLeaseRequest {
  credential: string;
  agent_id: string;
  instance_id: string;
  session_id?: string | null;
  ttl_seconds: number;
  proxy_policy?: ProxyPolicy | null;
}

/** One audit projection (spec: identifiers, actor, resource/correlation, action/outcome, timestamp, trace id). */
export interface CredentialAuditRecord {
  id: number;
  timestamp: string;
  actor: string | null;
  action: CredentialAuditAction;
  outcome: CredentialAuditOutcome;
  reason_code: string | null;
  resource: { lease_id: string | null; credential: string | null };
  correlation: { agent_id: string | null; instance_id: string | null; session_id: string | null };
  trace_id: string | null;
}

export interface CredentialAuditPage {
  available: boolean;
  date: string;
  records: CredentialAuditRecord[];
}

export type CredentialAuditAction =
  | 'lease.grant'
  | 'lease.revoke'
  | 'lease.expire'
  | 'proxy.http'
  | 'credential.add'
  | 'credential.delete'
  /** Gateway SSH leases (src/gateway/ssh): resource.lease_id is the sshlease_ id, correlation.instance_id its instance. */
  | 'gateway_ssh_lease.issue'
  | 'gateway_ssh_lease.revoke'
  | 'gateway_ssh_lease.expire'
  /** SSH connector (src/gateway/ssh/connector.ts): a connection's decision, and its end with bytes each way and duration. */
  | 'gateway_ssh_session.open'
  | 'gateway_ssh_session.close';
export type CredentialAuditOutcome = 'allowed' | 'denied' | 'error';

/** POST /api/v2/credential-proxy/http: the request (spec 4.14). */
export interface CredentialProxyRequest {
  lease_id: string;
  agent_id: string;
  instance_id: string;
  session_id: string | null;
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | null;
}

/** POST /api/v2/credential-proxy/http: the upstream's answer, the credential redacted. */
export interface CredentialProxyResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}
