/**
 * Secure bootstrap enrollment (spec 4.10; README "Secure bootstrap"): sandboxd stages a
 * single-use token for an instance, and the instance's agent exchanges it, once, with a CSR over
 * its own key for an agent certificate of that instance's SPIFFE id.
 *
 * - `stage` issues the token (32 random bytes, base64url), keeps only its SHA-256 in the token
 *   store, revokes any earlier active token of the instance (one live enrollment per instance),
 *   and writes the material file (0600, directory 0700) the agent reads. It answers only
 *   non-secret facts: the token id and expiry.
 * - `consume` looks the token up by its hash, claims it with one conditional UPDATE (of
 *   concurrent consumes exactly one wins), then issues the certificate for the CSR's key. When
 *   the CSR is bad or the CA cannot sign, the claim is undone: the token stays usable.
 * - `readiness` is the client-safe posture: counts, CA class and freshness, the taxonomy; no PEM,
 *   hash, token, key, CSR or path.
 *
 * The raw token lives only in the material file and in the agent's request: it is never stored,
 * logged, listed or put in an error; logs name tokens by token_id.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, isAbsolute } from 'node:path';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import { SvcError } from '../core/errors.js';
import { issueAgentCertForCsr, type CaMaterial } from '../identity/ca.js';
import { ensurePrivateDir, PRIVATE_FILE_MODE, writeFileAtomic } from '../identity/secure-files.js';
import { isValidName } from '../identity/spiffe.js';
import {
  BOOTSTRAP_MATERIAL_SCHEMA,
  type BootstrapConsumeResponse,
  type BootstrapMaterial,
  type BootstrapReadiness,
} from '../wire/bootstrap.js';
import { bootstrapReadiness } from './readiness.js';
import { tokenState, type BootstrapTokenStore, type TokenRow, type TokenState } from './token-store.js';

/** The `bootstrap` service, as checkpoint restores and warm-pool handoffs call it. */
export interface BootstrapService {
  /** Issues a single-use token for the instance and stages the agent's bootstrap material file with mode 0600 (dir 0700) at `file`; returns only non-secret facts. */
  stage(opts: { instanceId: string; agentId: string; file: string; ttlSeconds?: number }): Promise<{ tokenId: string; expiresAt: string }>;
  /** Revokes every unconsumed token of the instance (a VM deleted or a restore abandoned). Returns how many. */
  revokeInstance(instanceId: string): number;
  /** Token-store counts: issued/active/consumed/expired/revoked. */
  counts(): Record<'active' | 'consumed' | 'expired' | 'revoked', number>;
}

/** Bytes of a raw token (base64url: 43 characters). */
export const TOKEN_BYTES = 32;
/** Largest consume body, bytes (a P-256 CSR is ~0.5 KiB). */
export const CONSUME_MAX_BODY_BYTES = 16 * 1024;
/** Token TTLs stage accepts, seconds. */
export const MIN_TOKEN_TTL_SECONDS = 30;
export const MAX_TOKEN_TTL_SECONDS = 86_400;

export interface BootstrapMetrics {
  /** svc_bootstrap_tokens_issued_total */
  readonly issued: Counter;
  /** svc_bootstrap_tokens_consumed_total */
  readonly consumed: Counter;
  /** svc_bootstrap_consume_refused_total{code} */
  readonly refused: Counter<'code'>;
  /** svc_bootstrap_tokens_revoked_total */
  readonly revoked: Counter;
}

export interface BootstrapEnrollmentOptions {
  readonly store: BootstrapTokenStore;
  /** The CA, or null when it could not be loaded (readiness: failed; consume: ca_unavailable). */
  readonly ca: CaMaterial | null;
  readonly trustDomain: string;
  readonly enabled: boolean;
  readonly tokenTtlSeconds: number;
  /** The consume URL as agents reach it (asked at each stage: the HTTP port is known once bound). */
  readonly consumeUrl: () => string;
  readonly logger: Logger;
  readonly metrics: BootstrapMetrics;
  /** Clock (tests). Default Date.now. */
  readonly now?: () => number;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

export class BootstrapEnrollment implements BootstrapService {
  readonly #o: BootstrapEnrollmentOptions;
  readonly #now: () => number;

  constructor(o: BootstrapEnrollmentOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
  }

  async stage(opts: {
    instanceId: string;
    agentId: string;
    file: string;
    ttlSeconds?: number;
  }): Promise<{ tokenId: string; expiresAt: string }> {
    const { store, ca } = this.#o;
    if (!this.#o.enabled) throw new SvcError('bootstrap.disabled', 'bootstrap enrollment is turned off (SVC_BOOTSTRAP_ENROLLMENT=off)');
    if (!isValidName(opts.instanceId)) throw new SvcError('request.invalid', 'instanceId must be 1-128 of [A-Za-z0-9._-]');
    if (!isValidName(opts.agentId)) throw new SvcError('request.invalid', 'agentId must be 1-128 of [A-Za-z0-9._-]');
    if (!isAbsolute(opts.file)) throw new SvcError('request.invalid', 'the material file must be an absolute path');
    const ttl = opts.ttlSeconds ?? this.#o.tokenTtlSeconds;
    if (!Number.isInteger(ttl) || ttl < MIN_TOKEN_TTL_SECONDS || ttl > MAX_TOKEN_TTL_SECONDS)
      throw new SvcError('request.invalid', `ttlSeconds must be an integer from ${MIN_TOKEN_TTL_SECONDS} to ${MAX_TOKEN_TTL_SECONDS}`);
    if (ca === null) throw new SvcError('bootstrap.ca_unavailable', 'the CA is not loaded: no enrollment can be staged');
    const nowMs = this.#now();
    store.prune(nowMs);
    // One live enrollment per instance: a newer token replaces any earlier one (its file too, unless this one overwrites it).
    this.#revoke(opts.instanceId, nowMs, opts.file);
    const token = randomBytes(TOKEN_BYTES).toString('base64url');
    const row = {
      tokenId: randomUUID(),
      tokenHash: sha256(token),
      instanceId: opts.instanceId,
      agentId: opts.agentId,
      materialPath: opts.file,
      createdAtMs: nowMs,
      expiresAtMs: nowMs + ttl * 1000,
    };
    store.insert(row);
    const expiresAt = new Date(row.expiresAtMs).toISOString();
    const material: BootstrapMaterial = {
      schema_version: BOOTSTRAP_MATERIAL_SCHEMA,
      token,
      token_id: row.tokenId,
      consume_url: this.#o.consumeUrl(),
      ca_pem: ca.caCertPem,
      trust_domain: this.#o.trustDomain,
      instance_id: opts.instanceId,
      agent_id: opts.agentId,
      expires_at: expiresAt,
    };
    try {
      await mkdir(dirname(dirname(opts.file)), { recursive: true });
      await ensurePrivateDir(dirname(opts.file));
      await writeFileAtomic(opts.file, `${JSON.stringify(material, null, 2)}\n`, PRIVATE_FILE_MODE);
    } catch (err) {
      store.revokeInstance(opts.instanceId, nowMs);
      throw new SvcError(
        'server.internal',
        `the bootstrap material could not be staged: ${(err as NodeJS.ErrnoException).code ?? 'write failed'}`,
      );
    }
    this.#o.metrics.issued.inc();
    this.#o.logger.info({ tokenId: row.tokenId, instanceId: opts.instanceId, agentId: opts.agentId, expiresAt }, 'bootstrap token staged');
    return { tokenId: row.tokenId, expiresAt };
  }

  revokeInstance(instanceId: string): number {
    return this.#revoke(instanceId, this.#now(), null);
  }

  /** Revokes the instance's active tokens and removes their material files, except `keepFile` (a stage about to overwrite it). */
  #revoke(instanceId: string, nowMs: number, keepFile: string | null): number {
    const rows = this.#o.store.revokeInstance(instanceId, nowMs);
    for (const r of rows) {
      this.#o.metrics.revoked.inc();
      this.#o.logger.info(
        { tokenId: r.tokenId, instanceId, reason: keepFile === null ? 'revoked' : 'superseded' },
        'bootstrap token revoked',
      );
      // The file holds a token that no longer works: remove it now (best effort). Synchronously, so
      // a removal can never land after a later stage wrote new material to the same path.
      if (r.materialPath !== null && r.materialPath !== keepFile) {
        try {
          rmSync(r.materialPath, { force: true });
        } catch {
          // unreadable directory: the token is revoked whatever the file says
        }
      }
    }
    return rows.length;
  }

  counts(): Record<TokenState, number> {
    return this.#o.store.counts(this.#now());
  }

  /**
   * POST /api/v1/bootstrap-enrollment/consume with the raw body. Rejects with a taxonomy code;
   * no message ever contains the token.
   */
  async consume(rawBody: Uint8Array | null): Promise<BootstrapConsumeResponse> {
    try {
      const res = await this.#consume(rawBody);
      this.#o.metrics.consumed.inc();
      return res;
    } catch (err) {
      const code = err instanceof SvcError ? err.code : 'server.internal';
      this.#o.metrics.refused.inc({ code });
      throw err;
    }
  }

  async #consume(rawBody: Uint8Array | null): Promise<BootstrapConsumeResponse> {
    if (!this.#o.enabled) throw new SvcError('bootstrap.disabled', 'bootstrap enrollment is turned off');
    const { token, csr } = parseConsumeBody(rawBody);
    const hash = sha256(token);
    const row = this.#o.store.byHash(hash);
    // The lookup is by hash (an attacker learns nothing from its timing); compare again in constant time anyway.
    if (row === undefined || !timingSafeEqual(row.tokenHash, hash)) {
      throw new SvcError('bootstrap.token_unknown', 'the bootstrap token is not known');
    }
    const nowMs = this.#now();
    refuseUnlessActive(row, nowMs);
    const ca = this.#o.ca;
    if (ca === null || ca.caNotAfter.getTime() <= nowMs)
      throw new SvcError('bootstrap.ca_unavailable', 'the CA cannot sign now; the token stays usable');
    if (!this.#o.store.claim(row.tokenId, nowMs)) {
      // Someone else claimed (or it expired or was revoked) between the look-up and now.
      const again = this.#o.store.byId(row.tokenId);
      if (again !== undefined) refuseUnlessActive(again, this.#now());
      throw new SvcError('bootstrap.token_consumed', 'the bootstrap token was already used');
    }
    const log = this.#o.logger.child({ tokenId: row.tokenId, instanceId: row.instanceId, agentId: row.agentId });
    let issued;
    try {
      issued = await issueAgentCertForCsr(ca, { instanceId: row.instanceId, csrPem: csr, now: new Date(nowMs) });
    } catch (err) {
      this.#o.store.unclaim(row.tokenId, nowMs);
      if (err instanceof SvcError && err.code === 'bootstrap.csr_invalid') {
        log.warn({ reason: err.message }, 'bootstrap consume refused: bad CSR');
        throw err;
      }
      log.error({ err }, 'bootstrap consume: the CA could not issue the certificate');
      throw new SvcError('bootstrap.ca_unavailable', 'the CA could not issue the certificate; the token stays usable');
    }
    log.info(
      { spiffeId: issued.spiffeId, serial: issued.serialNumber, notAfter: issued.notAfter.toISOString() },
      'bootstrap token consumed',
    );
    return {
      certificate_pem: issued.certPem,
      ca_pem: ca.caCertPem,
      spiffe_id: issued.spiffeId,
      instance_id: row.instanceId,
      agent_id: row.agentId,
      // As the certificate says it: X.509 times have whole seconds.
      expires_at: new Date(Math.floor(issued.notAfter.getTime() / 1000) * 1000).toISOString(),
    };
  }

  /** GET /api/v2/admin/bootstrap/readiness (see the file comment). */
  readiness(): BootstrapReadiness {
    const nowMs = this.#now();
    let counts: Record<TokenState, number> | null = null;
    if (this.#o.store.open) {
      try {
        counts = this.#o.store.counts(nowMs);
      } catch {
        counts = null; // the store cannot be read: readiness says failed
      }
    }
    return bootstrapReadiness({
      nowMs,
      ca: this.#o.ca,
      enabled: this.#o.enabled,
      trustDomain: this.#o.trustDomain,
      tokenTtlSeconds: this.#o.tokenTtlSeconds,
      counts,
    });
  }
}

function refuseUnlessActive(row: TokenRow, nowMs: number): void {
  switch (tokenState(row, nowMs)) {
    case 'active':
      return;
    case 'consumed':
      throw new SvcError('bootstrap.token_consumed', 'the bootstrap token was already used');
    case 'revoked':
      throw new SvcError('bootstrap.token_revoked', 'the bootstrap token was revoked');
    case 'expired':
      throw new SvcError('bootstrap.token_expired', 'the bootstrap token has expired');
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The consume body, read here rather than by the JSON body mode so that no parser message (V8's
 * quote a piece of the input) can echo a token back: every failure is one fixed sentence.
 */
function parseConsumeBody(raw: Uint8Array | null): { token: string; csr: string } {
  const invalid = (): SvcError =>
    new SvcError('bootstrap.request_invalid', 'the body must be a JSON object {"token": string, "csr": PEM string}');
  if (raw === null || raw.byteLength === 0) throw invalid();
  let body: unknown;
  try {
    body = JSON.parse(utf8.decode(raw));
  } catch {
    throw invalid();
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid();
  const { token, csr } = body as Record<string, unknown>;
  if (typeof token !== 'string' || typeof csr !== 'string' || token === '' || csr === '') throw invalid();
  return { token, csr };
}
