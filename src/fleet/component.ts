/**
 * The fleet inventory and reconcile (spec 4.13; README "Fleet inventory and reconcile"), as two
 * components:
 * - `fleetInventoryComponent`: opens the inventory store (`$SVC_STATE_DIR/fleet/fleet.db`, or the
 *   PostgreSQL database of SVC_ACTIVITY_STORE when that is a postgres:// URL) and
 *   installs the request hooks that record desired workloads (intent-middleware.ts). Listed before
 *   `vms` and `checkpoints`, because a route middleware must be installed before the routes it
 *   wraps are registered. Provides `fleetInventory`.
 * - `fleetComponent`: observation (hypervisor events, agents-registry changes, the periodic sweep),
 *   the reconcile operation and the two v2 routes. Listed after `checkpoints` (it needs the VM
 *   feature, the hypervisor, the agents registry and the operations store). Provides `fleet`, the
 *   FleetPort other features call (src/fleet/port.ts).
 *
 * Metrics: `svc_fleet_inventory_revision`, `svc_fleet_inventory_backlog` and `svc_fleet_workloads{drift}`.
 */
import { join } from 'node:path';
import { Gauge } from 'prom-client';
import type { Component } from '../component/component.js';
import { serverHostId } from '../config/parsers.js';
import type { CreateVmRequest } from '../vms/create-request.js';
import { WORKLOAD_DRIFTS, type WorkloadOwner } from '../wire/fleet.js';
import { createIntent, recordIntent } from './desired.js';
import { FleetService } from './fleet-service.js';
import { intentMiddleware } from './intent-middleware.js';
import { SqliteInventoryStore, type InventoryStore } from './inventory-store.js';
import { PostgresInventoryStore } from './postgres-inventory-store.js';
import { registerFleetRoutes } from './routes.js';

/** The inventory store and the hook the fleet service settles intents through. */
export interface FleetInventory {
  readonly store: InventoryStore;
  /** Set by the fleet component: called after an intent was recorded. */
  settle: ((name: string, operationId: string) => void) | null;
  /**
   * Records a VM create accepted outside the routes (the MCP tool create_vm) as desired, like the
   * route middleware does for POST /api/v1/vms; resolves once it is durable.
   */
  readonly recordCreate: (req: CreateVmRequest, operationId: string, owner: WorkloadOwner) => Promise<void>;
}

declare module '../component/component.js' {
  interface Services {
    fleetInventory: FleetInventory;
    fleet: FleetService;
  }
}

export const FLEET_DIR = 'fleet';

export function fleetInventoryComponent(): Component {
  return {
    name: 'fleetInventory',
    async start(ctx) {
      const setting = ctx.config.activityStore;
      const store: InventoryStore =
        setting.kind === 'postgres'
          ? await PostgresInventoryStore.open(setting.url, serverHostId(ctx.config), ctx.logger.child({ component: 'fleet' }))
          : new SqliteInventoryStore(join(ctx.config.stateDir, FLEET_DIR));
      const inventory: FleetInventory = {
        store,
        settle: null,
        recordCreate: async (req, operationId, owner) => {
          recordIntent(store, req.name, createIntent(req, operationId, owner), Date.now());
          inventory.settle?.(req.name, operationId);
          await store.committed();
        },
      };
      ctx.router.use(
        intentMiddleware({
          store,
          identity: ctx.need('operatorIdentity'),
          onIntent: (name, operationId) => inventory.settle?.(name, operationId),
        }),
      );
      ctx.provide('fleetInventory', inventory);
      return { stop: () => store.close() };
    },
  };
}

export function fleetComponent(opts: { sweepIntervalMs?: number; createTimeoutMs?: number } = {}): Component {
  return {
    name: 'fleet',
    start(ctx) {
      const inventory = ctx.need('fleetInventory');
      const vms = ctx.need('vms');
      const agents = ctx.find('agents');
      const operations = ctx.need('operations');
      const service = new FleetService({
        store: inventory.store,
        hypervisor: ctx.need('hypervisor'),
        agents: agents === undefined ? null : agents.registry,
        operations,
        vms: {
          create: async (req) => (await vms.api.create(req)).operation.id,
          lifecycle: (name, action) => vms.api.lifecycle(name, action),
          remove: (name, o) => vms.api.remove(name, o),
        },
        logger: ctx.logger.child({ component: 'fleet' }),
        sweepIntervalMs: opts.sweepIntervalMs ?? ctx.config.fleetSweepIntervalSeconds * 1000,
        ...(opts.createTimeoutMs !== undefined && { createTimeoutMs: opts.createTimeoutMs }),
      });
      inventory.settle = (_name, operationId) => service.afterIntent(operationId);
      const registers = [ctx.metrics.registry];
      new Gauge({
        name: 'svc_fleet_inventory_revision',
        help: 'The fleet inventory_revision (raised by every change of a workload, desired or observed)',
        registers,
        collect() {
          this.set(service.inventoryRevision());
        },
      });
      new Gauge({
        name: 'svc_fleet_inventory_backlog',
        help: 'Fleet inventory changes made but not yet durable (PostgreSQL write-behind queue; always 0 on SQLite)',
        registers,
        collect() {
          this.set(inventory.store.backlog());
        },
      });
      new Gauge({
        name: 'svc_fleet_workloads',
        help: 'Fleet workloads by drift (none, pending, missing, state_mismatch, unmanaged, foreign)',
        labelNames: ['drift'],
        registers,
        collect() {
          const counts = new Map<string, number>(WORKLOAD_DRIFTS.map((d) => [d, 0]));
          for (const w of service.workloads()) counts.set(w.drift, (counts.get(w.drift) ?? 0) + 1);
          for (const [drift, n] of counts) this.set({ drift }, n);
        },
      });
      ctx.provide('fleet', service);
      service.start();
      return Promise.resolve({
        routes: (router) => registerFleetRoutes(router, { service, operations, identity: ctx.need('operatorIdentity') }),
        stop: () => {
          inventory.settle = null;
          service.stop();
          return Promise.resolve();
        },
      });
    },
  };
}
