/**
 * The HTTP API's wire shapes of gateway SSH leases (spec part 2 "Gateway SSH lease", 4.14; README
 * "SSH leases"). No shape here carries a public key body; the certificate appears only in the
 * issue response. A leaf: imports nothing outside src/wire.
 */

export type SshLeaseState = 'active' | 'revoked' | 'expired';
export type SshAccessMode = 'ssh';

/** An SSH lease as list, get and revoke return it (spec part 2). */
export interface SshLease {
  /** `sshlease_<32 hex>`. */
  id: string;
  /** The authenticated operator who issued it (the body's actor must equal it). */
  actor: string;
  /** The VM name (or an instance named in SVC_GATEWAY_SSH_TARGETS). */
  instance_id: string;
  principal: string;
  access_mode: SshAccessMode;
  /** `sha256:<hex>` (spec part 2): the SHA-256 of the key blob, the digest `ssh-keygen -lf` prints in base64. */
  public_key_sha256: string;
  /** ISO 8601 UTC, whole seconds: the certificate's valid-after and valid-before. */
  issued_at: string;
  expires_at: string;
  ttl_seconds: number;
  state: SshLeaseState;
  /** The certificate's key id (= the lease id); null when no CA key is configured (nothing signed). */
  certificate_key_id: string | null;
  /** `sha256:<hex>` of the certificate blob; null when nothing was signed. */
  certificate_sha256: string | null;
  revoked_at: string | null;
  /** Constant: revoking does not invalidate a certificate already issued (spec part 3). */
  revocation_effect: 'metadata_only_until_certificate_expiry';
}

/** POST /api/v2/gateway/ssh/leases: 201, the lease and, only here, the certificate. */
export interface SshLeaseIssued extends SshLease {
  /** The OpenSSH user certificate (one `…-cert-v01@openssh.com <base64>` line); only with SVC_GATEWAY_SSH_CA_KEY. */
  certificate?: string;
}

/** POST /api/v2/gateway/ssh/leases body (spec 4.14). Other fields are refused. */
export interface SshLeaseRequest {
  actor: string;
  instance_id: string;
  principal: string;
  access_mode: SshAccessMode;
  /** One OpenSSH public key line (`ssh-ed25519 AAAA… comment`); ed25519, ecdsa or rsa ≥ 2048 bits. */
  public_key: string;
  ttl_seconds: number;
}

/** GET /api/v2/gateway/ssh/leases: newest first, one page (our envelope; the spec's is "not shown"). */
export interface SshLeasePage {
  leases: SshLease[];
  /** How many leases match the filters (all pages). */
  total: number;
  limit: number;
  offset: number;
}
