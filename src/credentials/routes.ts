/**
 * Credential routes (the spec shows only /credentials/authority, /credentials/audit and the proxy;
 * the rest is ours, README "Credentials and the credential proxy"):
 *
 *   POST   /api/v2/credentials                  credentials.write  {name, value, injection?} → 201 credential
 *   GET    /api/v2/credentials                  credentials.read   {credentials, total}
 *   GET    /api/v2/credentials/{name}           credentials.read   credential
 *   DELETE /api/v2/credentials/{name}           credentials.write  {deleted, revoked_leases}
 *   POST   /api/v2/credentials/leases           credentials.lease  grant → 201 lease
 *   GET    /api/v2/credentials/leases           credentials.read   {leases, total} (?state, credential, agent_id)
 *   GET    /api/v2/credentials/leases/{id}      credentials.read   lease
 *   DELETE /api/v2/credentials/leases/{id}      credentials.lease  revoke → lease
 *   GET    /api/v2/credentials/audit?date=      credentials.read   {available, date, records}
 *   POST   /api/v2/credential-proxy/http        credentials.proxy  spec 4.14
 *
 * Every route resolves its caller through the one OperatorIdentity (src/auth). No response, log
 * line or audit record holds a credential's value.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import type { OperatorIdentity } from '../auth/operator-identity.js';
import { SvcError } from '../core/errors.js';
import { parseEnumParam, parseStringParam } from '../http/body.js';
import type { Router } from '../http/router.js';
import type { RequestView } from '../http/types.js';
import { isUtcDate, type CredentialAuditLog } from './audit-log.js';
import type { CredentialService } from './credential-service.js';
import { CREDENTIAL_LEASE_STATES } from './lease-types.js';
import { parsePolicy } from './policy.js';
import { checkCall, checkLease, deny, parseProxyCall, send, type ProxyLimits } from './proxy.js';

export interface CredentialRouteDeps {
  readonly service: CredentialService;
  readonly identity: OperatorIdentity;
  readonly audit: CredentialAuditLog | null;
  readonly limits: ProxyLimits;
  readonly logger: Logger;
  /** svc_credential_proxy_requests_total{outcome}: `allowed` or the error code. */
  readonly proxyCalls: Counter<'outcome'>;
}

/** Names are path segments; these are taken by routes. */
const RESERVED_NAMES = new Set(['leases', 'audit', 'authority']);
const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const HEADER_RE = /^[a-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
const kMinValueChars = 8;
const kMaxValueChars = 16 * 1024;
const bad = (message: string): SvcError => new SvcError('request.invalid', message);

function object(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad(`${what} must be a JSON object`);
  return v as Record<string, unknown>;
}

function idString(o: Record<string, unknown>, k: string, optional = false): string | null {
  const v = o[k];
  if (optional && (v === undefined || v === null)) return null;
  if (typeof v !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$/.test(v))
    throw bad(`${k} must be an id (letters, digits, . _ : -; at most 256)`);
  return v;
}

/** A W3C traceparent's trace id, else a fresh one. */
function traceIdOf(req: RequestView): string {
  const m = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(req.headers['traceparent'] ?? '');
  return m?.[1] ?? randomBytes(16).toString('hex');
}

export function registerCredentialRoutes(router: Router, d: CredentialRouteDeps): void {
  const { service, identity } = d;

  router.add({
    method: 'POST',
    path: '/api/v2/credentials',
    maxBodyBytes: 64 * 1024,
    handler: (req) => {
      const who = identity.require(req, 'credentials.write');
      const o = object(req.body, 'the body');
      const name = o['name'];
      if (typeof name !== 'string' || !NAME_RE.test(name) || RESERVED_NAMES.has(name)) {
        throw bad('name must match ^[a-z0-9][a-z0-9._-]{0,63}$ and not be leases, audit or authority');
      }
      const value = o['value'];
      if (typeof value !== 'string' || value.length < kMinValueChars || value.length > kMaxValueChars || /[\r\n\0]/.test(value)) {
        throw bad(`value must be a string of ${kMinValueChars}-${kMaxValueChars} characters without line breaks`);
      }
      const inj = o['injection'] === undefined ? {} : object(o['injection'], 'injection');
      const headerName = inj['header_name'] ?? 'authorization';
      const valuePrefix = inj['value_prefix'] ?? 'Bearer ';
      if (typeof headerName !== 'string' || !HEADER_RE.test(headerName.toLowerCase()))
        throw bad('injection.header_name must be a header name');
      if (typeof valuePrefix !== 'string' || valuePrefix.length > 64 || /[\r\n\0]/.test(valuePrefix))
        throw bad('injection.value_prefix must be a string of at most 64 characters');
      return { status: 201, json: service.add(name, value, headerName.toLowerCase(), valuePrefix, who.actor ?? 'unknown') };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v2/credentials',
    handler: (req) => {
      identity.require(req, 'credentials.read');
      const credentials = service.list();
      return { status: 200, json: { credentials, total: credentials.length } };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v2/credentials/leases',
    handler: (req) => {
      identity.require(req, 'credentials.read');
      const state = parseEnumParam(req.query, 'state', CREDENTIAL_LEASE_STATES);
      const credential = parseStringParam(req.query, 'credential', { maxLength: 64 });
      const agentId = parseStringParam(req.query, 'agent_id', { maxLength: 256 });
      const leases = service.leases({
        ...(state !== undefined && { state }),
        ...(credential !== undefined && { credential }),
        ...(agentId !== undefined && { agentId }),
      });
      return { status: 200, json: { leases, total: leases.length } };
    },
  });

  router.add({
    method: 'POST',
    path: '/api/v2/credentials/leases',
    maxBodyBytes: 64 * 1024,
    handler: (req) => {
      const who = identity.require(req, 'credentials.lease');
      const o = object(req.body, 'the body');
      const credential = o['credential'];
      if (typeof credential !== 'string' || !NAME_RE.test(credential)) throw bad('credential must be a credential name');
      const ttl = o['ttl_seconds'];
      if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 1 || ttl > 3600)
        throw bad('ttl_seconds must be an integer from 1 to 3600');
      const policyRaw = o['proxy_policy'];
      const headerName = service.headerOf(credential);
      const policy = policyRaw === undefined || policyRaw === null ? null : parsePolicy(policyRaw, headerName);
      const lease = service.grant({
        credential,
        agentId: idString(o, 'agent_id') as string,
        instanceId: idString(o, 'instance_id') as string,
        sessionId: idString(o, 'session_id', true),
        ttlSeconds: ttl,
        policy,
        actor: who.actor ?? 'unknown',
      });
      return { status: 201, json: lease };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v2/credentials/leases/:id',
    handler: (req) => {
      identity.require(req, 'credentials.read');
      return { status: 200, json: service.lease(req.params['id'] ?? '') };
    },
  });

  router.add({
    method: 'DELETE',
    path: '/api/v2/credentials/leases/:id',
    handler: (req) => {
      const who = identity.require(req, 'credentials.lease');
      return { status: 200, json: service.revoke(req.params['id'] ?? '', who.actor ?? 'unknown') };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v2/credentials/audit',
    handler: (req) => {
      identity.require(req, 'credentials.read');
      const date = req.query.get('date') ?? '';
      if (!isUtcDate(date)) throw bad('date must be a UTC calendar date YYYY-MM-DD');
      if (d.audit === null) return { status: 200, json: { available: false, date, records: [] } };
      return { status: 200, json: { available: true, date, records: d.audit.day(date) } };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v2/credentials/:name',
    handler: (req) => {
      identity.require(req, 'credentials.read');
      return { status: 200, json: service.get(req.params['name'] ?? '') };
    },
  });

  router.add({
    method: 'DELETE',
    path: '/api/v2/credentials/:name',
    handler: (req) => {
      const who = identity.require(req, 'credentials.write');
      const revoked = service.delete(req.params['name'] ?? '', who.actor ?? 'unknown');
      return { status: 200, json: { deleted: true, revoked_leases: revoked } };
    },
  });

  router.add({
    method: 'POST',
    path: '/api/v2/credential-proxy/http',
    // The workload's body is a JSON string inside ours: allow room for it and its escaping.
    maxBodyBytes: 2 * 1024 * 1024,
    handler: (req) => proxyHandler(req, d),
  });
}

async function proxyHandler(req: RequestView, d: CredentialRouteDeps): Promise<{ status: number; json: unknown }> {
  const who = d.identity.require(req, 'credentials.proxy');
  const call = parseProxyCall(req.body);
  const traceId = traceIdOf(req);
  const lease = d.service.findLease(call.lease_id);
  const base = {
    action: 'proxy.http' as const,
    actor: who.actor,
    leaseId: call.lease_id,
    credential: lease?.credential ?? null,
    agentId: call.agent_id,
    instanceId: call.instance_id,
    sessionId: call.session_id,
    traceId,
  };
  let host: string | null = null;
  let path: string | null = null;
  try {
    const leaseDenial = checkLease(lease, call, Date.now());
    if (leaseDenial !== null || lease === undefined)
      throw deny(leaseDenial ?? { code: 'credential_proxy.lease_not_found', message: 'no such lease' });
    const checked = await checkCall(lease, call, d.service.headerOf(lease.credential));
    if ('code' in checked) throw deny(checked);
    host = checked.url.host;
    path = checked.url.pathname;
    // The value is opened only for a call that passed every check.
    const res = await send(call, checked, d.service.injection(lease.credential), d.limits);
    d.audit?.write({ ...base, outcome: 'allowed', reasonCode: null, details: { method: call.method, host, path, status: res.status } });
    d.proxyCalls.inc({ outcome: 'allowed' });
    return { status: 200, json: res };
  } catch (err) {
    if (err instanceof SvcError) {
      const denied = err.httpStatus < 500;
      d.audit?.write({ ...base, outcome: denied ? 'denied' : 'error', reasonCode: err.code, details: { method: call.method, host, path } });
      d.proxyCalls.inc({ outcome: err.code });
      d.logger.info(
        { lease: call.lease_id, agent: call.agent_id, code: err.code, traceId },
        denied ? 'credential proxy call denied' : 'credential proxy call failed',
      );
    }
    throw err;
  }
}
