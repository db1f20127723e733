/**
 * The server-level routes as one component: health and readiness, metrics, the legacy proxy, the
 * hypervisor's health (when the hypervisor component runs) and the dashboard's page and assets.
 * What they report of other components is looked up when asked, so any subset serves them.
 */
import type { Component } from '../component/component.js';
import { uwsRuntimeInfo } from '../http/uws-server.js';
import { registerDashboardRoutes } from './dashboard.js';
import { registerHealthRoutes } from './health.js';
import { registerHypervisorHealthRoute } from './hypervisor-health.js';
import { registerLegacyProxyRoutes } from './legacy-proxy.js';
import { registerMetricsRoute } from './metrics.js';

export const serverRoutesComponent: Component = {
  name: 'server-routes',
  start(ctx) {
    const { config } = ctx;
    return Promise.resolve({
      routes(router) {
        registerHealthRoutes(router, {
          readiness: () => ctx.readiness.state(),
          startedAtMs: ctx.startedAtMs,
          agentCount: () => ctx.find('agents')?.connectedCount() ?? 0,
          activeTasks: () => ctx.find('tasks')?.activeCount() ?? 0,
          uws: uwsRuntimeInfo,
          actors: () => {
            const s = ctx.find('actors')?.stats();
            return { mode: s?.mode ?? config.actorsMode, shards: s?.shards ?? 0, restarts: s?.restarts ?? 0 };
          },
        });
        registerMetricsRoute(router, ctx.metrics);
        registerLegacyProxyRoutes(router, { enabled: config.enableDirectSshOrchProxy });
        const hypervisor = ctx.find('hypervisor');
        if (hypervisor !== undefined) registerHypervisorHealthRoute(router, { hypervisor });
        registerDashboardRoutes(router, {
          wsAddress: () => ({ host: config.wsAddr.host, port: ctx.find('output')?.ws.port ?? config.wsAddr.port }),
          activityScope: () => {
            const activity = ctx.find('activity');
            return activity === undefined ? null : { tenant_id: activity.tenantId, host_id: activity.hostId };
          },
        });
      },
      stop: () => Promise.resolve(),
    });
  },
};
