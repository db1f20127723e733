/**
 * The storage component: streamed downloads from the global area, agent inboxes and task
 * outboxes (routes.ts), the scoped storage API with its write reviews (scoped-routes.ts; reviews
 * in `$SVC_STATE_DIR/storage-reviews/`), and the inbox quota that keeps
 * svc_agentshare_inbox_bytes.
 */
import { Counter } from 'prom-client';
import type { Component } from '../component/component.js';
import { InboxQuota } from './inbox-quota.js';
import { ReviewStore } from './review-store.js';
import { registerStorageRoutes } from './routes.js';
import { registerScopedStorageRoutes } from './scoped-routes.js';
import { reviewsDir, ScopedStorage } from './scoped-storage.js';
import { Storage } from './storage.js';

declare module '../component/component.js' {
  interface Services {
    storage: Storage;
  }
}

export const storageComponent: Component = {
  name: 'storage',
  start(ctx) {
    const { config } = ctx;
    const storage = new Storage({ rootDir: config.storageDir, maxDownloadBytes: config.storageMaxDownloadBytes });
    const inboxQuota = new InboxQuota({
      inboxesDir: storage.inboxesDir(),
      quotaBytes: config.inboxQuotaBytes,
      gauge: ctx.metrics.agentshareInboxBytes,
    });
    inboxQuota.start();
    const reviews = new ReviewStore(reviewsDir(config.stateDir), { logger: ctx.logger.child({ component: 'storage' }) });
    const writes = new Counter({
      name: 'svc_storage_writes_total',
      help: 'Scoped storage writes by op (put, delete) and outcome (requested, applied, rejected, failed)',
      labelNames: ['op', 'outcome'],
      registers: [ctx.metrics.registry],
    });
    const scoped = new ScopedStorage({ storage, reviews, quota: inboxQuota, writes });
    // Without the auth component (a feature subset, as some tests start) there is nobody to
    // check permissions against: the scoped API is then not served at all (fail closed).
    const identity = ctx.find('operatorIdentity');
    ctx.provide('storage', storage);
    return Promise.resolve({
      routes: (router) => {
        registerStorageRoutes(router, { storage });
        if (identity !== undefined) registerScopedStorageRoutes(router, { scoped, identity });
      },
      stop: async () => {
        await inboxQuota.stop();
        reviews.close();
      },
    });
  },
};
