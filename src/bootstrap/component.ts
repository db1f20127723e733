/**
 * The bootstrap component (spec 4.10, issue 20; README "Secure bootstrap"): opens the token store
 * (`<SVC_STATE_DIR>/bootstrap/bootstrap.db`), loads the CA, provides the `bootstrap` service
 * (stage, revokeInstance, counts; consume and readiness for the routes) and registers the consume
 * and readiness routes. Listed after the HTTP listener (the default consume URL names its bound
 * port) and before every component that stages enrollments.
 *
 * A token store that cannot be opened is a start-up error naming SVC_STATE_DIR. A CA that cannot
 * be loaded is not: the server starts, readiness says `failed` and consume answers
 * bootstrap.ca_unavailable, so a client can see why secure enrollment is down.
 */
import { isIPv6 } from 'node:net';
import { join } from 'node:path';
import { Counter, Gauge } from 'prom-client';
import { OperatorIdentity } from '../auth/operator-identity.js';
import { EMPTY_ROLES } from '../auth/roles-file.js';
import type { Component } from '../component/component.js';
import { ensureCa, type CaMaterial } from '../identity/ca.js';
import { errorMessage } from '../util/error-message.js';
import { BOOTSTRAP_CONSUME_PATH } from '../wire/bootstrap.js';
import { registerBootstrapRoutes } from './routes.js';
import { BootstrapEnrollment, type BootstrapService } from './service.js';
import { BootstrapTokenStore } from './token-store.js';

declare module '../component/component.js' {
  interface Services {
    bootstrap: BootstrapService & Pick<BootstrapEnrollment, 'consume' | 'readiness'>;
  }
}

/** Where the token store lives, under SVC_STATE_DIR. */
export const BOOTSTRAP_DIR = 'bootstrap';

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '']);

/** `http://<host>:<port>/api/v1/bootstrap-enrollment/consume` for a listen address (a wildcard host as loopback). */
export function defaultConsumeUrl(host: string, port: number): string {
  const h = WILDCARD_HOSTS.has(host) ? '127.0.0.1' : isIPv6(host) ? `[${host}]` : host;
  return `http://${h}:${port}${BOOTSTRAP_CONSUME_PATH}`;
}

export function bootstrapComponent(): Component {
  return {
    name: 'bootstrap',
    async start(ctx) {
      const { config } = ctx;
      const logger = ctx.logger.child({ component: 'bootstrap' });
      let store: BootstrapTokenStore;
      try {
        store = new BootstrapTokenStore(join(config.stateDir, BOOTSTRAP_DIR));
      } catch (err) {
        throw new Error(`SVC_STATE_DIR: the bootstrap token store cannot be opened: ${errorMessage(err)}`, { cause: err });
      }
      let ca: CaMaterial | null = null;
      const jobs = ctx.find('jobs');
      try {
        ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain, ...(jobs !== undefined && { jobs }) });
      } catch (err) {
        logger.error({ err }, 'bootstrap enrollment: the CA cannot be loaded; consume answers bootstrap.ca_unavailable');
      }
      const registers = [ctx.metrics.registry];
      const refused = new Counter({
        name: 'svc_bootstrap_consume_refused_total',
        help: 'Bootstrap consume requests refused, by enrollment error code',
        labelNames: ['code'] as const,
        registers,
      });
      const enrollment = new BootstrapEnrollment({
        store,
        ca,
        trustDomain: config.trustDomain,
        enabled: config.bootstrapEnrollment === 'on',
        tokenTtlSeconds: config.bootstrapTokenTtlSeconds,
        consumeUrl: () =>
          config.bootstrapConsumeUrl ?? defaultConsumeUrl(config.httpAddr.host, ctx.find('http')?.port ?? config.httpAddr.port),
        logger,
        metrics: {
          issued: new Counter({ name: 'svc_bootstrap_tokens_issued_total', help: 'Bootstrap tokens staged', registers }),
          consumed: new Counter({
            name: 'svc_bootstrap_tokens_consumed_total',
            help: 'Bootstrap tokens consumed (a certificate issued)',
            registers,
          }),
          refused,
          revoked: new Counter({
            name: 'svc_bootstrap_tokens_revoked_total',
            help: 'Bootstrap tokens revoked before use (VM deleted, restore abandoned, superseded by a newer token)',
            registers,
          }),
        },
      });
      new Gauge({
        name: 'svc_bootstrap_tokens',
        help: 'Bootstrap tokens in the token store by state (active, consumed, expired, revoked; pruned a week after expiry)',
        labelNames: ['state'] as const,
        registers,
        collect() {
          if (!store.open) return;
          for (const [state, n] of Object.entries(enrollment.counts())) this.set({ state }, n);
        },
      });
      ctx.provide('bootstrap', enrollment);
      const identity =
        ctx.find('operatorIdentity') ??
        new OperatorIdentity({ trustDomain: config.trustDomain, localRole: config.localRole, roles: () => EMPTY_ROLES });
      logger.info(
        {
          enabled: config.bootstrapEnrollment === 'on',
          ca: ca === null ? 'unavailable' : 'local-file-ca',
          tokenTtlSeconds: config.bootstrapTokenTtlSeconds,
        },
        'bootstrap enrollment ready',
      );
      return {
        routes: (router) => registerBootstrapRoutes(router, { enrollment, identity }),
        stop: () => {
          store.close();
          return Promise.resolve();
        },
      };
    },
  };
}
