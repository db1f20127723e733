/**
 * Delegation tokens of the desktop listener (spec part 5 "Desktop routes"; the spec leaves the
 * identity authority "not shown"). A token is a compact JWS (a JWT) signed with Ed25519 (EdDSA) or
 * ES256 by the configured issuer, verified with `jose` against its public key
 * (SVC_DESKTOP_TOKEN_ISSUER_KEY). Required claims: `aud` (SVC_DESKTOP_TOKEN_AUDIENCE), `exp`,
 * `sub` (the caller) and `workspace` (the caller's workspace); `iss` must equal
 * SVC_DESKTOP_TOKEN_ISSUER when that is set; `nbf` is honoured; a `cnf` claim (RFC 8705) binds the
 * token to one client certificate: `x5t#S256` must be the base64url SHA-256 of the certificate the
 * connection presented. The subject and workspace are the
 * caller of every desktop route: nothing in the request's other headers, path or body names one.
 *
 * The key comes through a {@link DesktopAuthority} (a key resolver), consulted once per token
 * verification and never before the listener's pre-checks passed, so a test can count it. A
 * resolver that fails is "the admission authority is unavailable" (503 route_unavailable); a
 * token that fails verification is 403 access_denied.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { errors as joseErrors, jwtVerify, type JWTHeaderParameters } from 'jose';

/** Where verification keys come from. */
export interface DesktopAuthority {
  /** The key that must have signed a token with this protected header; rejects when the authority is unavailable. */
  resolveKey(header: JWTHeaderParameters): Promise<KeyObject>;
}

/** The authenticated caller of a desktop route. */
export interface DesktopCaller {
  readonly subject: string;
  readonly workspace: string;
}

export type TokenVerdict =
  | { readonly ok: true; readonly caller: DesktopCaller }
  | { readonly ok: false; readonly reason: 'invalid' | 'unavailable'; readonly detail: string };

/** The algorithms a public key may verify. */
export function algorithmsFor(key: KeyObject): string[] {
  if (key.asymmetricKeyType === 'ed25519') return ['EdDSA', 'Ed25519'];
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return ['ES256'];
  throw new Error(`the issuer key is ${key.asymmetricKeyType ?? 'unknown'}; an Ed25519 or P-256 public key is needed`);
}

/** The authority of a PEM public key file (SPKI), read once at start. */
export function fileAuthority(path: string): DesktopAuthority & { readonly algorithms: readonly string[] } {
  let key: KeyObject;
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
    key = createPublicKey(pem);
  } catch (err) {
    throw new Error(`SVC_DESKTOP_TOKEN_ISSUER_KEY=${path}: not a readable PEM public key (${(err as Error).message})`, { cause: err });
  }
  // createPublicKey would derive the public key from a private one: refuse that file instead, so a
  // signing key is never left where sandboxd reads its configuration.
  if (pem.includes('PRIVATE KEY')) throw new Error(`SVC_DESKTOP_TOKEN_ISSUER_KEY=${path}: holds a private key; give the public key only`);
  const algorithms = algorithmsFor(key);
  return { algorithms, resolveKey: () => Promise.resolve(key) };
}

const WORKSPACE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

export interface VerifyOptions {
  readonly authority: DesktopAuthority;
  readonly audience: string;
  readonly issuer: string | null;
  readonly algorithms: readonly string[];
  readonly nowMs: number;
  /** SHA-256 of the DER client certificate of the connection (for certificate-bound tokens). */
  readonly certSha256: Buffer;
}

/** Verifies a delegation token; never rejects. */
export async function verifyDelegationToken(token: string, opts: VerifyOptions): Promise<TokenVerdict> {
  let unavailable: string | undefined;
  try {
    const { payload } = await jwtVerify(
      token,
      async (header) => {
        try {
          return await opts.authority.resolveKey(header);
        } catch (err) {
          unavailable = err instanceof Error ? err.message : String(err);
          throw err;
        }
      },
      {
        audience: opts.audience,
        ...(opts.issuer !== null && { issuer: opts.issuer }),
        algorithms: [...opts.algorithms],
        requiredClaims: ['exp', 'sub', 'aud'],
        currentDate: new Date(opts.nowMs),
      },
    );
    const workspace = payload['workspace'];
    if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 256) {
      return { ok: false, reason: 'invalid', detail: 'the token has no usable sub claim' };
    }
    if (typeof workspace !== 'string' || !WORKSPACE_PATTERN.test(workspace)) {
      return { ok: false, reason: 'invalid', detail: 'the token has no usable workspace claim' };
    }
    // RFC 8705 certificate-bound token: when the token names a certificate (cnf.x5t#S256), it is
    // usable only over a connection that presented that certificate.
    const cnf = payload['cnf'];
    if (cnf !== undefined) {
      const thumbprint = typeof cnf === 'object' && cnf !== null ? (cnf as Record<string, unknown>)['x5t#S256'] : undefined;
      if (typeof thumbprint !== 'string' || thumbprint !== opts.certSha256.toString('base64url')) {
        return { ok: false, reason: 'invalid', detail: 'the token is bound to another client certificate' };
      }
    }
    return { ok: true, caller: { subject: payload.sub, workspace } };
  } catch (err) {
    if (unavailable !== undefined) return { ok: false, reason: 'unavailable', detail: 'the token authority is unavailable' };
    if (err instanceof joseErrors.JWTExpired) return { ok: false, reason: 'invalid', detail: 'the token has expired' };
    if (err instanceof joseErrors.JWSSignatureVerificationFailed)
      return { ok: false, reason: 'invalid', detail: 'the token signature does not verify' };
    if (err instanceof joseErrors.JWTClaimValidationFailed)
      return { ok: false, reason: 'invalid', detail: `the token's ${err.claim} claim is not accepted` };
    return { ok: false, reason: 'invalid', detail: 'the token is not a valid delegation token' };
  }
}
