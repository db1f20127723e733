/**
 * The gateway SSH lease component (spec 4.14, issue part 1): the lease store
 * (`<SVC_STATE_DIR>/gateway-ssh/ssh-leases.db`), the certificate signer when SVC_GATEWAY_SSH_CA_KEY
 * is set, and the lease routes. Provides the store as the `sshLeases` service (the SSH connector
 * asks it for an actor's active lease). Listed after the credentials component, whose audit log
 * (`credentialAudit`) it writes `gateway_ssh_lease.*` records to, and after the hypervisor, which
 * it asks whether a lease's instance exists.
 *
 * A CA key that cannot be used (missing, unreadable, encrypted, not a private key) is a start-up
 * error naming the variable: signing is never silently off when it was asked for.
 */
import { join } from 'node:path';
import { Counter, Gauge } from 'prom-client';
import { OperatorIdentity } from '../../auth/operator-identity.js';
import { EMPTY_ROLES } from '../../auth/roles-file.js';
import type { Component } from '../../component/component.js';
import { SshLeaseStore } from './lease-store.js';
import { registerSshLeaseRoutes } from './routes.js';
import { SshCertificateSigner } from './signer.js';

/** Where the lease database lives, under SVC_STATE_DIR. */
export const GATEWAY_SSH_DIR = 'gateway-ssh';

declare module '../../component/component.js' {
  interface Services {
    sshLeases: SshLeaseStore;
  }
}

export function gatewaySshComponent(): Component {
  return {
    name: 'gateway-ssh',
    async start(ctx) {
      const { config } = ctx;
      const logger = ctx.logger.child({ component: 'gateway-ssh' });
      const signer = config.gatewaySshCaKey === null ? null : await SshCertificateSigner.open(config.gatewaySshCaKey);
      const audit = ctx.find('credentialAudit') ?? null;
      const store = new SshLeaseStore({ dir: join(config.stateDir, GATEWAY_SSH_DIR), logger, audit });
      ctx.provide('sshLeases', store);
      const identity =
        ctx.find('operatorIdentity') ??
        new OperatorIdentity({ trustDomain: config.trustDomain, localRole: config.localRole, roles: () => EMPTY_ROLES });
      const hypervisor = ctx.find('hypervisor');
      const targets = new Set(config.gatewaySshTargets.map(([instance]) => instance));
      const principals =
        config.gatewaySshAuthorizedPrincipals.length > 0 ? config.gatewaySshAuthorizedPrincipals : [config.gatewaySshAuthorizedUser];
      const issues = new Counter({
        name: 'svc_gateway_ssh_lease_requests_total',
        help: 'SSH lease issue requests by outcome: issued, or the error code of the refusal or failure',
        labelNames: ['outcome'] as const,
        registers: [ctx.metrics.registry],
      });
      issues.inc({ outcome: 'issued' }, 0);
      new Gauge({
        name: 'svc_gateway_ssh_leases_active',
        help: 'SSH leases in state active',
        registers: [ctx.metrics.registry],
        collect() {
          this.set(store.activeCount());
        },
      });
      logger.info(
        { signing: signer !== null, ca: signer?.caSha256 ?? null, principals, activeLeases: store.activeCount() },
        'gateway SSH leases ready',
      );
      return {
        routes: (router) =>
          registerSshLeaseRoutes(router, {
            store,
            identity,
            signer,
            // A VM by name or by instance id (its uuid), as the connector resolves it.
            instanceKnown: async (instanceId) =>
              targets.has(instanceId) ||
              (hypervisor !== undefined &&
                ((await hypervisor.get(instanceId)) !== null ||
                  (await hypervisor.list()).some((d) => d.metadata.instanceId === instanceId || d.uuid === instanceId))),
            principals,
            maxTtlSeconds: config.gatewaySshLeaseMaxTtlSeconds,
            audit,
            issues,
            logger,
          }),
        stop: () => {
          store.close();
          return Promise.resolve();
        },
      };
    },
  };
}
