/**
 * Operator identity as two components (README "Operator identity, roles and permissions").
 *
 * `authComponent`: the `operatorIdentity` service (src/auth/operator-identity.ts), with the roles
 * of SVC_OPERATOR_ROLES read through RolesFile, and GET /api/v2/credentials/authority. Listed
 * first: every component with v2 routes needs the service. An SVC_OPERATOR_ROLES file that cannot
 * be used at start is a start-up error (a typo is caught when it is made); once running, a file
 * that becomes unusable makes mTLS callers fail closed until it is fixed (no restart needed).
 *
 * `adminListenerComponent`: the admin listener (SVC_ADMIN_ADDR, `off` for none), HTTPS with
 * mutual TLS serving the shared router, with sandboxd's server certificate from its CA (the one
 * the gRPC listener presents). Only operator certificates get past it: any other verified
 * certificate (an agent's, the server's) is answered 403 `identity.operator_required` before a
 * route is matched. Listed after the HTTP listener, like it serving the routes of every component.
 */
import type { DetailedPeerCertificate } from 'node:tls';
import type { Component } from '../component/component.js';
import { isLoopbackHost } from '../config/parsers.js';
import type { Config } from '../config/schema.js';
import { SvcError } from '../core/errors.js';
import { startMtlsListener, type MtlsListener, type PeerDecision } from '../http/mtls-listener.js';
import { ensureCa } from '../identity/ca.js';
import { identityFromPeerCertificate, spiffeIdOf } from '../identity/spiffe.js';
import { OperatorIdentity } from './operator-identity.js';
import { EMPTY_ROLES, RolesFile } from './roles-file.js';
import { registerAuthRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    operatorIdentity: OperatorIdentity;
    adminListener: MtlsListener;
  }
}

export const authComponent: Component = {
  name: 'auth',
  start(ctx) {
    const { config } = ctx;
    const log = ctx.logger.child({ component: 'auth' });
    let roles = () => EMPTY_ROLES;
    if (config.operatorRolesFile !== null) {
      const file = new RolesFile({ path: config.operatorRolesFile, logger: log });
      const first = file.table();
      if (!first.ok) return Promise.reject(new Error(`SVC_OPERATOR_ROLES=${config.operatorRolesFile}: ${first.reason}`));
      roles = () => file.table();
    }
    const identity = new OperatorIdentity({ trustDomain: config.trustDomain, localRole: config.localRole, roles });
    ctx.provide('operatorIdentity', identity);
    return Promise.resolve({
      routes: (router) => registerAuthRoutes(router, { identity }),
      stop: () => Promise.resolve(),
    });
  },
};

export const adminListenerComponent: Component = {
  name: 'admin',
  readiness: ['admin'],
  async start(ctx) {
    const { config } = ctx;
    const addr = config.adminAddr;
    if (addr === null) return { stop: () => Promise.resolve() };
    const log = ctx.logger.child({ component: 'admin' });
    const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain, serverHosts: serverHosts(config) });
    const listener = await startMtlsListener({
      host: addr.host,
      port: addr.port,
      router: ctx.router,
      logger: log,
      tls: { certPem: ca.serverCertPem, keyPem: ca.serverKeyPem, caPem: ca.caCertPem },
      identify: (cert) => {
        const decision = adminPeer(cert, config.trustDomain);
        if (!decision.ok)
          log.warn({ fingerprint256: cert.fingerprint256, reason: decision.error.message }, 'admin listener refused a certificate');
        return decision;
      },
      maxBodyBytes: config.maxBodyBytes,
      metrics: ctx.metrics,
    });
    ctx.provide('adminListener', listener);
    return { stop: () => listener.close() };
  },
};

/**
 * The request peer of a verified client certificate on the admin listener: an operator's SPIFFE
 * ID, or 403 `identity.operator_required` for anything else (an agent's or the server's
 * certificate, or one without exactly one SPIFFE ID of the trust domain).
 */
export function adminPeer(
  cert: Pick<DetailedPeerCertificate, 'raw' | 'subjectaltname' | 'fingerprint256'>,
  trustDomain: string,
): PeerDecision {
  const identity = identityFromPeerCertificate(cert, trustDomain);
  if (identity === null || identity.kind !== 'operator') {
    const what = identity === null ? 'has no SPIFFE ID of this trust domain' : `is a ${identity.kind} identity`;
    return {
      ok: false,
      error: new SvcError(
        'identity.operator_required',
        `the client certificate ${what}; the admin listener needs an operator certificate (sandboxd certs issue-operator)`,
      ),
    };
  }
  return { ok: true, peer: { transport: 'mtls', spiffeId: spiffeIdOf(trustDomain, identity), fingerprint256: cert.fingerprint256 } };
}

/**
 * Extra names of the server certificate: the admin and gRPC listeners' hosts when they are
 * specific non-loopback addresses. Both listeners ask ensureCa; with the union of both, the
 * certificate one issues is still good for the other, so they do not reissue it in turn.
 */
function serverHosts(config: Config): string[] {
  const hosts = [config.adminAddr?.host, config.grpcAddr.host].filter(
    (h): h is string => h !== undefined && h !== '0.0.0.0' && h !== '::' && !isLoopbackHost(h),
  );
  return [...new Set(hosts)];
}
