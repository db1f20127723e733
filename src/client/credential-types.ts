/**
 * Records of the credential routes (README "Credentials and the credential proxy"). A credential's
 * value is write-only: no record here carries it.
 */

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

export interface ProxyPolicy {
  hosts: string[];
  path_prefixes: string[];
  methods: string[];
  header_allowlist: string[];
}

export interface CredentialLease {
  id: string;
  credential: string;
  agent_id: string;
  instance_id: string;
  session_id: string | null;
  actor: string;
  ttl_seconds: number;
  issued_at: string;
  expires_at: string;
  state: 'active' | 'revoked' | 'expired';
  revoked_at: string | null;
  ended_cause: string | null;
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

export interface CredentialAuditRecord {
  id: number;
  timestamp: string;
  actor: string | null;
  action: string;
  outcome: 'allowed' | 'denied' | 'error';
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
