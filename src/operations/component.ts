/**
 * The operations component: the one operations store of the server (VM operations, reprovisions,
 * and the v2 admin checkpoint, restore, warm-pool and handoff operations), kept in
 * `<SVC_STATE_DIR>/operations/operations.db` across restarts, and its two routes
 * (GET /api/v1/operations/{id}, GET /api/v2/admin/operations/{id}). It provides the `operations`
 * service (an OperationTracker: get, waitFor, begin, refuse, and the store) to the components
 * after it. Listed before the actors and VMs, so it is stopped after them (reverse order) and
 * takes their last snapshots before it closes the file.
 *
 * A file that cannot be opened (an unusable state directory, a schema newer than this build) is
 * a start-up error; a corrupt file is set aside and a fresh one started (src/operations/operation-db.ts).
 */
import { join } from 'node:path';
import { Gauge } from 'prom-client';
import { OperatorIdentity } from '../auth/operator-identity.js';
import { EMPTY_ROLES } from '../auth/roles-file.js';
import type { Component, ComponentContext } from '../component/component.js';
import type { Router } from '../http/router.js';
import { errorMessage } from '../util/error-message.js';
import { OperationDb } from './operation-db.js';
import { OperationStore } from './operation-store.js';
import { OperationTracker } from './operation-tracker.js';
import { registerAdminOperationRoutes, registerOperationRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    operations: OperationTracker;
  }
}

/** Where the operations file lives, under SVC_STATE_DIR. */
export const OPERATIONS_DIR = 'operations';

/** An opened operations store with what the root wires. */
export interface StartedOperations {
  readonly operations: OperationTracker;
  routes(router: Router): void;
  /** Writes what is pending and closes the file. Idempotent. */
  stop(): void;
}

/**
 * Opens the store on its file, starts its sweep and counts its failed writes. Also used by the VM
 * component when it is started without this one (tests that start a subset).
 */
export function startOperations(ctx: Pick<ComponentContext, 'config' | 'logger' | 'metrics' | 'find'>): StartedOperations {
  const { config } = ctx;
  const logger = ctx.logger.child({ component: 'operations' });
  const dir = join(config.stateDir, OPERATIONS_DIR);
  let db: OperationDb | undefined;
  let store: OperationStore;
  try {
    db = new OperationDb(dir, {
      onCorrupt: (what, id, reason) =>
        what === 'file'
          ? logger.error({ setAside: id, reason }, 'the operations file is corrupt: set aside, starting with no operations')
          : logger.warn({ operation: id, reason }, 'skipped a corrupt stored operation'),
    });
    store = new OperationStore({ db, retentionMs: config.operationRetentionSeconds * 1000, logger });
  } catch (err) {
    db?.close();
    throw new Error(`SVC_STATE_DIR: the operations file under ${dir} cannot be opened: ${errorMessage(err)}`, { cause: err });
  }
  store.start();
  const operations = new OperationTracker(store, logger);
  new Gauge({
    name: 'svc_operations_write_failures',
    help: 'Operation snapshots the operations file could not take since start (kept in memory; the log says why)',
    registers: [ctx.metrics.registry],
    collect() {
      this.set(store.writeFailures);
    },
  });
  const identity =
    ctx.find('operatorIdentity') ??
    new OperatorIdentity({ trustDomain: config.trustDomain, localRole: config.localRole, roles: () => EMPTY_ROLES });
  return {
    operations,
    routes(router) {
      registerOperationRoutes(router, { operations });
      registerAdminOperationRoutes(router, { operations, identity });
    },
    stop: () => store.close(),
  };
}

export function operationsComponent(): Component {
  return {
    name: 'operations',
    start(ctx) {
      // The executor turns a file that cannot be opened into a rejected start.
      return new Promise((resolve) => {
        const started = startOperations(ctx);
        ctx.provide('operations', started.operations);
        resolve({ routes: (router) => started.routes(router), stop: () => Promise.resolve(started.stop()) });
      });
    },
  };
}
