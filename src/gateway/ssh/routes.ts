/**
 * Gateway SSH lease routes (spec 4.14; README "SSH leases"), on both listeners:
 *
 *   POST   /api/v2/gateway/ssh/leases        ssh.lease.issue   {actor, instance_id, principal, access_mode, public_key, ttl_seconds} → 201 lease (+ certificate)
 *   GET    /api/v2/gateway/ssh/leases        ssh.lease.read    {leases, total, limit, offset} (?state, actor, instance_id, limit, offset)
 *   GET    /api/v2/gateway/ssh/leases/{id}   ssh.lease.read    lease
 *   DELETE /api/v2/gateway/ssh/leases/{id}   ssh.lease.revoke  revoke → lease (state revoked, record kept)
 *
 * Every route resolves its caller with OperatorIdentity.requireSsh: spec part 5 says SSH
 * permissions need an authenticated operator identity and the trusted local listener claims none,
 * so there every route (not only issue) answers 403 auth.ssh_identity_required.
 *
 * The body's actor must be the authenticated operator, whatever the role (403
 * ssh_lease.actor_mismatch): the spec takes a lease's actor from the identity, and a certificate
 * goes to whoever holds the key, so nobody issues in another's name.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import type { OperatorIdentity } from '../../auth/operator-identity.js';
import { SvcError } from '../../core/errors.js';
import { parseEnumParam, parseIntParam, parseStringParam } from '../../http/body.js';
import type { Router } from '../../http/router.js';
import type { RequestView } from '../../http/types.js';
import type { SshLeaseIssued, SshLeasePage, SshLeaseRequest } from '../../wire/ssh-leases.js';
import { newSshLeaseId, type SshLeaseAuditSink, type SshLeaseStore } from './lease-store.js';
import { SSH_ACCESS_MODES, SSH_LEASE_STATES, type SshAccessMode } from './lease-types.js';
import { parsePublicKey } from './public-key.js';
import type { SshCertificateSigner } from './signer.js';

/** Shortest lease, seconds (as credential leases, spec part 8). */
export const kMinSshLeaseTtlSeconds = 1;
/** Largest page of GET /api/v2/gateway/ssh/leases, and its default. */
export const kMaxSshLeasePage = 500;
export const kDefaultSshLeasePage = 100;

export interface SshLeaseRouteDeps {
  readonly store: SshLeaseStore;
  readonly identity: OperatorIdentity;
  /** null: no SVC_GATEWAY_SSH_CA_KEY, leases are metadata only. */
  readonly signer: SshCertificateSigner | null;
  /** Whether an instance id names a VM the hypervisor knows, by name or instance id (or a configured SSH target). */
  readonly instanceKnown: (instanceId: string) => Promise<boolean>;
  /** The principals a lease may name (SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS, else the authorized user). */
  readonly principals: readonly string[];
  /** SVC_GATEWAY_SSH_LEASE_MAX_TTL_SECONDS. */
  readonly maxTtlSeconds: number;
  /** Refused issues are audited here too (outcome denied, with the error code). */
  readonly audit: SshLeaseAuditSink | null;
  /** svc_gateway_ssh_lease_requests_total{outcome}: `issued` or the error code. */
  readonly issues: Counter<'outcome'>;
  readonly logger: Logger;
}

const FIELDS: readonly (keyof SshLeaseRequest)[] = ['actor', 'instance_id', 'principal', 'access_mode', 'public_key', 'ttl_seconds'];
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$/;
const ACTOR_RE = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/;
const LEASE_ID_RE = /^sshlease_[0-9a-f]{32}$/;
const bad = (message: string): SvcError => new SvcError('request.invalid', message);

/** A W3C traceparent's trace id, else a fresh one. */
function traceIdOf(req: RequestView): string {
  const m = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(req.headers['traceparent'] ?? '');
  return m?.[1] ?? randomBytes(16).toString('hex');
}

/** The body's shape: an object of exactly the spec's fields, each of the right type (400 request.invalid). */
function shapeOf(body: unknown): SshLeaseRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bad('the body must be a JSON object');
  const o = body as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !(FIELDS as readonly string[]).includes(k));
  if (unknown.length > 0) throw bad(`unknown field(s) ${unknown.slice(0, 5).join(', ')}: the body has only ${FIELDS.join(', ')}`);
  for (const k of FIELDS) if (o[k] === undefined || o[k] === null) throw bad(`${k} is required`);
  for (const k of ['actor', 'instance_id', 'principal', 'access_mode'] as const)
    if (typeof o[k] !== 'string') throw bad(`${k} must be a string`);
  if (typeof o['ttl_seconds'] !== 'number' || !Number.isInteger(o['ttl_seconds'])) throw bad('ttl_seconds must be an integer');
  if (!ACTOR_RE.test(o['actor'] as string)) throw bad('actor must be an operator name');
  if (!ID_RE.test(o['instance_id'] as string)) throw bad('instance_id must be an id (letters, digits, . _ : -; at most 256)');
  return o as unknown as SshLeaseRequest;
}

export function registerSshLeaseRoutes(router: Router, d: SshLeaseRouteDeps): void {
  const { store, identity } = d;

  router.add({
    method: 'POST',
    path: '/api/v2/gateway/ssh/leases',
    maxBodyBytes: 64 * 1024,
    handler: async (req) => {
      const traceId = traceIdOf(req);
      try {
        const json = await issue(req, d, traceId);
        d.issues.inc({ outcome: 'issued' });
        return { status: 201, json };
      } catch (err) {
        d.issues.inc({ outcome: err instanceof SvcError ? err.code : 'server.internal' });
        if (err instanceof SvcError && err.httpStatus < 500) {
          const who = identity.resolve(req);
          const body = req.body as Record<string, unknown> | undefined;
          const instance = typeof body?.['instance_id'] === 'string' && ID_RE.test(body['instance_id']) ? body['instance_id'] : null;
          d.audit?.write({
            action: 'gateway_ssh_lease.issue',
            outcome: 'denied',
            reasonCode: err.code,
            actor: who.actor,
            leaseId: null,
            credential: null,
            agentId: null,
            instanceId: instance,
            sessionId: null,
            traceId,
          });
        }
        throw err;
      }
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v2/gateway/ssh/leases',
    handler: (req) => {
      identity.requireSsh(req, 'ssh.lease.read');
      const state = parseEnumParam(req.query, 'state', SSH_LEASE_STATES);
      const actor = parseStringParam(req.query, 'actor', { maxLength: 128 });
      const instanceId = parseStringParam(req.query, 'instance_id', { maxLength: 256 });
      const limit = parseIntParam(req.query, 'limit', { min: 1, max: kMaxSshLeasePage, default: kDefaultSshLeasePage });
      const offset = parseIntParam(req.query, 'offset', { min: 0, max: 1_000_000_000, default: 0 });
      const page = store.list(
        { ...(state !== undefined && { state }), ...(actor !== undefined && { actor }), ...(instanceId !== undefined && { instanceId }) },
        { limit, offset },
      );
      const json: SshLeasePage = { leases: page.leases, total: page.total, limit, offset };
      return { status: 200, json };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v2/gateway/ssh/leases/:id',
    handler: (req) => {
      identity.requireSsh(req, 'ssh.lease.read');
      return { status: 200, json: store.require(leaseIdOf(req)) };
    },
  });

  router.add({
    method: 'DELETE',
    path: '/api/v2/gateway/ssh/leases/:id',
    handler: (req) => {
      const who = identity.requireSsh(req, 'ssh.lease.revoke');
      return { status: 200, json: store.revoke(leaseIdOf(req), who.actor ?? 'unknown', traceIdOf(req)) };
    },
  });
}

function leaseIdOf(req: RequestView): string {
  const id = req.params['id'] ?? '';
  if (!LEASE_ID_RE.test(id)) throw new SvcError('ssh_lease.not_found', `no SSH lease ${id.slice(0, 80)}`, { lease_id: id.slice(0, 80) });
  return id;
}

async function issue(req: RequestView, d: SshLeaseRouteDeps, traceId: string): Promise<SshLeaseIssued> {
  const who = d.identity.requireSsh(req, 'ssh.lease.issue');
  const body = shapeOf(req.body);
  if (!(SSH_ACCESS_MODES as readonly string[]).includes(body.access_mode)) {
    throw new SvcError('ssh_lease.access_mode_unsupported', `access_mode must be one of ${SSH_ACCESS_MODES.join(', ')}`, {
      access_mode: body.access_mode.slice(0, 64),
    });
  }
  const accessMode: SshAccessMode = body.access_mode;
  if (body.actor !== who.actor) {
    throw new SvcError(
      'ssh_lease.actor_mismatch',
      `actor must be the authenticated operator (${who.actor ?? '?'}): leases are issued only in the caller's own name`,
    );
  }
  const ttl = body.ttl_seconds;
  if (ttl < kMinSshLeaseTtlSeconds || ttl > d.maxTtlSeconds) {
    throw new SvcError('ssh_lease.ttl_out_of_range', `ttl_seconds must be from ${kMinSshLeaseTtlSeconds} to ${d.maxTtlSeconds}`, {
      min: kMinSshLeaseTtlSeconds,
      max: d.maxTtlSeconds,
    });
  }
  const key = parsePublicKey(body.public_key);
  if (!d.principals.includes(body.principal)) {
    throw new SvcError(
      'ssh_lease.principal_not_allowed',
      `principal ${body.principal.slice(0, 64)} is not accepted by the guests: use one of ${d.principals.join(', ')}`,
      { allowed: d.principals.join(',') },
    );
  }
  if (!(await d.instanceKnown(body.instance_id))) {
    throw new SvcError('ssh_lease.instance_not_found', `no VM or SSH target named ${body.instance_id}`, { instance_id: body.instance_id });
  }
  const id = newSshLeaseId();
  // Whole seconds: the certificate's validity is in seconds, and the lease window is exactly it.
  const issuedAtMs = Math.floor(Date.now() / 1000) * 1000;
  const signed =
    d.signer === null
      ? null
      : await d.signer.sign({
          publicKeyLine: key.line,
          keyId: id,
          principal: body.principal,
          accessMode,
          validAfterSec: issuedAtMs / 1000,
          validBeforeSec: issuedAtMs / 1000 + ttl,
        });
  const record = d.store.issue({
    id,
    actor: body.actor,
    instanceId: body.instance_id,
    principal: body.principal,
    accessMode,
    publicKeySha256: key.sha256,
    issuedAtMs,
    ttlSeconds: ttl,
    certificate: signed === null ? null : { keyId: id, sha256: signed.sha256 },
    traceId,
  });
  return signed === null ? { ...record } : { ...record, certificate: signed.certificate };
}
