/**
 * The credentials component: credentials and their leases (credentials.db in
 * SVC_STATE_DIR/credentials, values sealed with the key in SECRETS_DIR), the credential audit log
 * (credential-audit.db beside it, unless SVC_CREDENTIAL_AUDIT=off), the credential proxy, and their routes. Listed after the events
 * component (lease moves are events).
 *
 * Callers are resolved through the `operatorIdentity` service, which the auth component provides;
 * when no component provides it (a server started without the auth component, as some tests
 * do), this one builds the same resolver from the config: the trusted local listener with
 * SVC_LOCAL_ROLE, and no operator roles table (every certificate a viewer).
 */
import { join } from 'node:path';
import { Counter } from 'prom-client';
import { OperatorIdentity } from '../auth/operator-identity.js';
import { EMPTY_ROLES } from '../auth/roles-file.js';
import type { Component } from '../component/component.js';
import { CredentialAuditLog } from './audit-log.js';
import { CredentialService } from './credential-service.js';
import { CredentialStore } from './credential-store.js';
import { registerCredentialRoutes } from './routes.js';
import { SecretBox } from './secret-box.js';

/** Where the credential database and the audit log live, under SVC_STATE_DIR. */
export const CREDENTIALS_DIR = 'credentials';

declare module '../component/component.js' {
  interface Services {
    credentials: CredentialService;
    /** The credential audit log, when SVC_CREDENTIAL_AUDIT is on (gateway SSH leases and SSH connector sessions write to it too). */
    credentialAudit: CredentialAuditLog;
  }
}

export function credentialsComponent(): Component {
  return {
    name: 'credentials',
    async start(ctx) {
      const { config } = ctx;
      const logger = ctx.logger.child({ component: 'credentials' });
      const box = await SecretBox.open(config.secretsDir);
      // A directory of their own (0700): the state directory itself must stay traversable by QEMU
      // (libvirt-qemu opens the VMs' disks under it), so it is never narrowed here.
      const dir = join(config.stateDir, CREDENTIALS_DIR);
      const store = new CredentialStore(dir);
      const audit = config.credentialAudit === 'on' ? new CredentialAuditLog(dir) : null;
      const service = new CredentialService({ store, box, audit, events: ctx.find('events'), logger });
      ctx.provide('credentials', service);
      if (audit !== null) ctx.provide('credentialAudit', audit);
      const identity =
        ctx.find('operatorIdentity') ??
        new OperatorIdentity({ trustDomain: config.trustDomain, localRole: config.localRole, roles: () => EMPTY_ROLES });
      const proxyCalls = new Counter({
        name: 'svc_credential_proxy_requests_total',
        help: 'Credential proxy calls by outcome: allowed, or the error code of the denial or failure',
        labelNames: ['outcome'] as const,
        registers: [ctx.metrics.registry],
      });
      proxyCalls.inc({ outcome: 'allowed' }, 0);
      logger.info({ audit: audit !== null }, 'credentials ready');
      return {
        routes: (router) =>
          registerCredentialRoutes(router, {
            service,
            identity,
            audit,
            limits: { timeoutMs: config.credentialProxyTimeoutMs, maxResponseBytes: config.credentialProxyMaxResponseBytes },
            logger,
            proxyCalls,
          }),
        stop: () => {
          service.stop();
          store.close();
          audit?.close();
          return Promise.resolve();
        },
      };
    },
  };
}
