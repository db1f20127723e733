/**
 * The storage component: downloads from the global area, agent inboxes and task outboxes (its
 * routes), and the inbox quota that keeps svc_agentshare_inbox_bytes.
 */
import type { Component } from '../component/component.js';
import { InboxQuota } from './inbox-quota.js';
import { registerStorageRoutes } from './routes.js';
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
    ctx.provide('storage', storage);
    return Promise.resolve({
      routes: (router) => registerStorageRoutes(router, { storage }),
      stop: () => Promise.resolve(inboxQuota.stop()),
    });
  },
};
