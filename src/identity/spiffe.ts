/**
 * SPIFFE identities of sandboxd's mTLS peers, read from verified client certificates.
 *
 *   spiffe://<trust-domain>/agent/<instance_id>   an agent (Connect)
 *   spiffe://<trust-domain>/operator/<name>       an operator (Exec, admin calls)
 *   spiffe://<trust-domain>/server                sandboxd itself
 *
 * Only call these with certificates the TLS layer has already chain-verified (grpc-js fills
 * `getAuthContext().sslPeerCertificate` only when `socket.authorized`): this module reads the
 * identity, it does not check signatures or expiry.
 */
import { X509Certificate } from 'node:crypto';
import type { ErrorCode } from '../core/errors.js';

/** Who is on the other end of a verified mTLS connection. */
export type PeerIdentity = { kind: 'agent'; instanceId: string } | { kind: 'operator'; name: string } | { kind: 'server' };

/** Instance ids and operator names: 1–128 of [A-Za-z0-9._-], never "." or "..". */
export const NAME_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

/** True when `value` is usable as an instance id or operator name (see NAME_PATTERN). */
export function isValidName(value: string): boolean {
  return NAME_PATTERN.test(value) && value !== '.' && value !== '..';
}

/** The SPIFFE ID URI of `identity` in `trustDomain`. Throws on an invalid id or name. */
export function spiffeIdOf(trustDomain: string, identity: PeerIdentity): string {
  switch (identity.kind) {
    case 'agent':
      if (!isValidName(identity.instanceId))
        throw new Error(`invalid instance id ${JSON.stringify(identity.instanceId)}: use 1-128 of [A-Za-z0-9._-]`);
      return `spiffe://${trustDomain}/agent/${identity.instanceId}`;
    case 'operator':
      if (!isValidName(identity.name))
        throw new Error(`invalid operator name ${JSON.stringify(identity.name)}: use 1-128 of [A-Za-z0-9._-]`);
      return `spiffe://${trustDomain}/operator/${identity.name}`;
    case 'server':
      return `spiffe://${trustDomain}/server`;
  }
}

/**
 * Parses one SPIFFE ID. Null unless it is exactly one of the three shapes above in
 * `trustDomain`: no other trust domain, no empty, "." or ".." segment, no percent-encoding,
 * query, fragment, port or user info, no trailing slash.
 */
export function parseSpiffeId(uri: string, trustDomain: string): PeerIdentity | null {
  const prefix = `spiffe://${trustDomain}/`;
  if (!uri.startsWith(prefix)) return null;
  const segments = uri.slice(prefix.length).split('/');
  if (!segments.every(isValidName)) return null;
  const [kind, id, ...rest] = segments;
  if (rest.length > 0) return null;
  if (kind === 'server' && id === undefined) return { kind: 'server' };
  if (id === undefined) return null;
  if (kind === 'agent') return { kind: 'agent', instanceId: id };
  if (kind === 'operator') return { kind: 'operator', name: id };
  return null;
}

/**
 * Splits Node's subjectAltName string ("URI:a, DNS:b, IP Address:c") into entries. Node quotes a
 * value as a JSON string when it holds a comma or other special character, so a crafted URI
 * cannot smuggle in a second entry; a string this parser does not understand yields null.
 */
export function parseSubjectAltName(san: string): { type: string; value: string }[] | null {
  const out: { type: string; value: string }[] = [];
  let i = 0;
  while (i < san.length) {
    const colon = san.indexOf(':', i);
    if (colon < 0) return null;
    const type = san.slice(i, colon);
    let j = colon + 1;
    let value: string;
    if (san[j] === '"') {
      let k = j + 1;
      while (k < san.length && san[k] !== '"') k += san[k] === '\\' ? 2 : 1;
      if (k >= san.length) return null;
      try {
        value = JSON.parse(san.slice(j, k + 1)) as string;
      } catch {
        return null;
      }
      j = k + 1;
    } else {
      const end = san.indexOf(', ', j);
      value = san.slice(j, end < 0 ? san.length : end);
      j = end < 0 ? san.length : end;
    }
    out.push({ type, value });
    if (j >= san.length) break;
    if (!san.startsWith(', ', j)) return null;
    i = j + 2;
  }
  return out;
}

/**
 * The identity of a verified peer certificate (tls.PeerCertificate or grpc-js's
 * sslPeerCertificate). Reads Node's `subjectaltname` string when the object has one — what
 * TLSSocket.getPeerCertificate() made from the very certificate the handshake verified, with the
 * same formatter (and escaping) as X509Certificate.subjectAltName since Node 17.3.1 (this server
 * needs 20) — else parses `raw` (DER). Parsing the DER again cost ≈ 0.1 ms per connection
 * (OpenSSL 3.0 decodes the public key through its provider decoders), more than verifying the
 * certificate's signature; every agent's registration paid it (native-bench/README.md, fleet).
 * Null when there is no certificate, no SPIFFE URI, more than one SPIFFE URI (whatever they
 * say), or one that parseSpiffeId refuses.
 */
export function identityFromPeerCertificate(
  cert: { subjectaltname?: string | undefined; raw?: Buffer | undefined } | null | undefined,
  trustDomain: string,
): PeerIdentity | null {
  if (cert === undefined || cert === null) return null;
  let san = cert.subjectaltname;
  if (san === undefined && cert.raw !== undefined && cert.raw.length > 0) {
    try {
      san = new X509Certificate(cert.raw).subjectAltName;
    } catch {
      return null;
    }
  }
  if (san === undefined || san === '') return null;
  const entries = parseSubjectAltName(san);
  if (entries === null) return null;
  const spiffe = entries.filter((e) => e.type === 'URI' && e.value.toLowerCase().startsWith('spiffe:'));
  if (spiffe.length !== 1 || spiffe[0] === undefined) return null;
  return parseSpiffeId(spiffe[0].value, trustDomain);
}

/** Outcome of an identity check; `code` is an ERROR_TABLE code (gRPC status from the table). */
export type IdentityCheck<T = object> =
  ({ ok: true } & T) | { ok: false; code: Extract<ErrorCode, 'agent.identity_mismatch' | 'agent.unauthenticated'>; message: string };

/** Quotes untrusted metadata for an error message, bounded in length. */
function quote(value: string): string {
  return JSON.stringify(value.length > 140 ? `${value.slice(0, 140)}…` : value);
}

/**
 * Checks a Connect call: the peer must be an agent whose certificate instance id equals metadata
 * x-agent-instance-id, and the retired x-agent-secret must be absent.
 *   - x-agent-secret present → agent.unauthenticated (whatever else the call carries)
 *   - no verified identity → agent.unauthenticated
 *   - operator/server certificate, missing or different x-agent-instance-id → agent.identity_mismatch
 */
export function checkAgentMetadata(
  identity: PeerIdentity | null,
  metadata: { instanceId?: string | undefined; secret?: string | undefined },
): IdentityCheck {
  if (metadata.secret !== undefined) {
    return {
      ok: false,
      code: 'agent.unauthenticated',
      message: 'x-agent-secret is retired: the shared-secret path no longer exists; agents authenticate with their mTLS certificate',
    };
  }
  if (identity === null) {
    return {
      ok: false,
      code: 'agent.unauthenticated',
      message: 'no verified client certificate with a SPIFFE identity of this trust domain',
    };
  }
  if (identity.kind !== 'agent') {
    return { ok: false, code: 'agent.identity_mismatch', message: `the client certificate is a ${identity.kind} identity, not an agent's` };
  }
  if (metadata.instanceId === undefined || metadata.instanceId === '') {
    return {
      ok: false,
      code: 'agent.identity_mismatch',
      message: "metadata x-agent-instance-id is required and must equal the certificate's instance id",
    };
  }
  if (metadata.instanceId !== identity.instanceId) {
    return {
      ok: false,
      code: 'agent.identity_mismatch',
      message: `x-agent-instance-id ${quote(metadata.instanceId)} does not match the certificate's instance id ${quote(identity.instanceId)}`,
    };
  }
  return { ok: true };
}

/**
 * Checks an operator call (Exec): the peer must hold an operator certificate; an agent's
 * certificate is refused (agent.identity_mismatch, PERMISSION_DENIED), none is
 * agent.unauthenticated.
 */
export function checkOperatorIdentity(identity: PeerIdentity | null): IdentityCheck<{ name: string }> {
  if (identity === null) {
    return {
      ok: false,
      code: 'agent.unauthenticated',
      message: 'no verified client certificate with a SPIFFE identity of this trust domain',
    };
  }
  if (identity.kind !== 'operator') {
    return {
      ok: false,
      code: 'agent.identity_mismatch',
      message: `this call needs an operator certificate; the client presented a ${identity.kind} identity`,
    };
  }
  return { ok: true, name: identity.name };
}
