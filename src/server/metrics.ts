/** GET /metrics (spec 4.1): the Prometheus text exposition of the one registry made in main. */
import type { Router } from '../http/router.js';
import type { Metrics } from '../observability/metrics.js';

/** Register GET /metrics. Collection is async (default metrics read process state per scrape). */
export function registerMetricsRoute(router: Router, metrics: Pick<Metrics, 'registry' | 'contentType'>): void {
  router.add({
    method: 'GET',
    path: '/metrics',
    handler: async () => ({
      status: 200,
      headers: { 'cache-control': 'no-store' },
      body: await metrics.registry.metrics(),
      contentType: metrics.contentType,
    }),
  });
}
