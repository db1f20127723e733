/**
 * The activity component (spec 4.12, issue 19): opens the store SVC_ACTIVITY_STORE names (SQLite
 * under `<SVC_STATE_DIR>/activity` by default, or PostgreSQL), runs retention, registers the three
 * routes and provides the `activity` service (store + self-ingest) to the components after it.
 *
 * A store that cannot be opened (a PostgreSQL URL that does not answer, a state directory that
 * cannot be written) is a start-up error naming SVC_ACTIVITY_STORE: activity that is asked for is
 * never silently off.
 */
import { join } from 'node:path';
import { Counter, Gauge } from 'prom-client';
import { OperatorIdentity } from '../auth/operator-identity.js';
import { EMPTY_ROLES } from '../auth/roles-file.js';
import type { Component } from '../component/component.js';
import { serverHostId, type ActivityStoreSetting } from '../config/parsers.js';
import { errorMessage } from '../util/error-message.js';
import { PostgresActivityStore } from './postgres-store.js';
import { ActivityRetention } from './retention.js';
import { registerActivityRoutes } from './routes.js';
import { ActivityService } from './service.js';
import { SqliteActivityStore } from './sqlite-store.js';
import type { ActivityStore } from './store.js';

/** Where the SQLite store lives, under SVC_STATE_DIR. */
export const ACTIVITY_DIR = 'activity';

async function openStore(setting: ActivityStoreSetting, stateDir: string): Promise<ActivityStore> {
  try {
    return setting.kind === 'sqlite'
      ? await SqliteActivityStore.open(join(stateDir, ACTIVITY_DIR))
      : await PostgresActivityStore.open(setting.url);
  } catch (err) {
    throw new Error(`SVC_ACTIVITY_STORE: the ${setting.kind} activity store cannot be opened: ${errorMessage(err)}`, { cause: err });
  }
}

export function activityComponent(): Component {
  return {
    name: 'activity',
    async start(ctx) {
      const { config } = ctx;
      const logger = ctx.logger.child({ component: 'activity' });
      const store = await openStore(config.activityStore, config.stateDir);
      const service = new ActivityService({ store, tenantId: config.tenantId, hostId: serverHostId(config) });
      ctx.provide('activity', service);
      const identity =
        ctx.find('operatorIdentity') ??
        new OperatorIdentity({ trustDomain: config.trustDomain, localRole: config.localRole, roles: () => EMPTY_ROLES });
      const requests = new Counter({
        name: 'svc_activity_ingest_requests_total',
        help: 'Activity ingest requests by outcome: acknowledged (after the durable commit), or the error code of the refusal',
        labelNames: ['outcome'] as const,
        registers: [ctx.metrics.registry],
      });
      requests.inc({ outcome: 'acknowledged' }, 0);
      const events = new Counter({
        name: 'svc_activity_events_total',
        help: 'Activity events of acknowledged batches: accepted (stored) or duplicate (already stored, no second row)',
        labelNames: ['result'] as const,
        registers: [ctx.metrics.registry],
      });
      events.inc({ result: 'accepted' }, 0);
      events.inc({ result: 'duplicate' }, 0);
      const retention = new ActivityRetention({ store, retentionDays: config.activityRetentionDays, logger });
      new Gauge({
        name: 'svc_activity_retention_pruned_events',
        help: 'Activity events deleted by retention since start (SVC_ACTIVITY_RETENTION_DAYS)',
        registers: [ctx.metrics.registry],
        collect() {
          this.set(retention.stats().prunedEvents);
        },
      });
      new Gauge({
        name: 'svc_activity_retention_failed_passes',
        help: 'Retention passes that could not prune the activity store since start (the log says why)',
        registers: [ctx.metrics.registry],
        collect() {
          this.set(retention.stats().failedPasses);
        },
      });
      retention.start();
      logger.info(
        {
          store: store.kind,
          location: store.location,
          retentionDays: config.activityRetentionDays,
          tenant: service.tenantId,
          host: service.hostId,
        },
        'activity store ready',
      );
      return {
        routes: (router) => registerActivityRoutes(router, { store, identity, requests, events }),
        stop: async () => {
          await retention.stop();
          await store.close();
        },
      };
    },
  };
}
