/**
 * The `desktop` component: managed desktop sessions (spec 4.15; README "Managed desktop
 * sessions"). Off unless SVC_DESKTOP_ADDR is set; then it opens `$SVC_STATE_DIR/desktop/desktop.db`,
 * starts the backend (the `none` backend unless a test or a future build passes another) and the
 * desktop listener with sandboxd's server certificate. Its routes are served on that listener
 * only, never on the shared router: they are not behind the operator identity.
 *
 * SVC_DESKTOP_ADDR without SVC_DESKTOP_TOKEN_ISSUER_KEY, or a key that is not an Ed25519 or P-256
 * public key, is a start-up error.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Counter } from 'prom-client';
import type { Component } from '../component/component.js';
import { ensureCa } from '../identity/ca.js';
import { statusClass } from '../observability/metrics.js';
import { identityFromPeerCertificate } from '../identity/spiffe.js';
import { noneBackend, type DesktopBackend } from './backend.js';
import { startDesktopListener, type DesktopListener } from './desktop-listener.js';
import { DesktopService } from './desktop-service.js';
import { DesktopStore } from './desktop-store.js';
import { fileAuthority, type DesktopAuthority } from './token-authority.js';

declare module '../component/component.js' {
  interface Services {
    desktop: DesktopService;
    desktopListener: DesktopListener;
  }
}

export const DESKTOP_DIR = 'desktop';

export interface DesktopComponentOptions {
  /** Wraps the key authority (tests count how often it is consulted). */
  readonly authority?: (inner: DesktopAuthority) => DesktopAuthority;
  readonly backend?: DesktopBackend;
  /** Clock, Unix ms, for the service and token expiry. Default Date.now. */
  readonly now?: () => number;
}

export function desktopComponent(opts: DesktopComponentOptions = {}): Component {
  return {
    name: 'desktop',
    async start(ctx) {
      const { config } = ctx;
      const addr = config.desktopAddr;
      if (addr === null) return { stop: () => Promise.resolve() };
      if (config.desktopTokenIssuerKey === null) {
        throw new Error('SVC_DESKTOP_ADDR is set but SVC_DESKTOP_TOKEN_ISSUER_KEY is not: the desktop listener needs the token issuer key');
      }
      const logger = ctx.logger.child({ component: 'desktop' });
      const now = opts.now ?? Date.now;
      const file = fileAuthority(config.desktopTokenIssuerKey);
      const authority = opts.authority?.(file) ?? file;
      const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
      const clientCaPem = config.desktopClientCa === null ? null : await readFile(config.desktopClientCa, 'utf8');
      const store = new DesktopStore(join(config.stateDir, DESKTOP_DIR));
      const backend = opts.backend ?? noneBackend();
      const events = ctx.find('events');
      const service = new DesktopService({
        store,
        backend,
        logger,
        grantTtlMs: config.desktopGrantTtlSeconds * 1000,
        now,
        ...(events !== undefined && { events }),
      });
      const requests = new Counter({
        name: 'svc_desktop_requests_total',
        help: 'Requests answered by the desktop listener, by route pattern and status class',
        labelNames: ['route', 'status_class'],
        registers: [ctx.metrics.registry],
      });
      const refusals = new Counter({
        name: 'svc_desktop_refusals_total',
        help: 'Desktop requests refused, by problem code',
        labelNames: ['code'],
        registers: [ctx.metrics.registry],
      });
      let listener: DesktopListener;
      try {
        backend.start(service.hooks());
        listener = await startDesktopListener({
          host: addr.host,
          port: addr.port,
          tls: { certPem: ca.serverCertPem, keyPem: ca.serverKeyPem, caPem: clientCaPem ?? ca.caCertPem },
          acceptPeer: (cert) => {
            if (clientCaPem !== null) return null;
            const identity = identityFromPeerCertificate(cert, config.trustDomain);
            return identity?.kind === 'operator' ? null : 'the desktop listener needs an operator certificate of this server';
          },
          authority,
          algorithms: file.algorithms,
          audience: config.desktopTokenAudience,
          issuer: config.desktopTokenIssuer,
          service,
          logger,
          now,
          onAnswer: (route, status, code) => {
            requests.inc({ route, status_class: statusClass(status) });
            if (code !== null) refusals.inc({ code });
          },
        });
      } catch (err) {
        await backend.stop();
        store.close();
        throw err;
      }
      const prune = setInterval(() => service.pruneGrants(), 60_000).unref();
      ctx.provide('desktop', service);
      ctx.provide('desktopListener', listener);
      return {
        stop: async () => {
          clearInterval(prune);
          await listener.close();
          await backend.stop();
          store.close();
        },
      };
    },
  };
}
