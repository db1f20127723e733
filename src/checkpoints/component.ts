/**
 * The `checkpoints` component: pre-enrollment checkpoints and warm pools (spec 4.10) over the
 * hypervisor, the VM feature, the agents registry, bootstrap enrollment and the one operations
 * store. Listed after `vms` (it creates and deploys VMs); its store is
 * `$SVC_STATE_DIR/checkpoints/`. Refill of every pool below its target starts with it.
 *
 * Metrics: `svc_warm_pool_size{pool}` (target), `svc_warm_pool_ready_slots{pool}`,
 * `svc_warm_pool_handoffs_total{pool,outcome}` (completed, failed, empty),
 * `svc_warm_pool_handoff_seconds{pool}` (claim → agent Ready) and
 * `svc_warm_pool_refill_failures_total{pool}`.
 */
import { join } from 'node:path';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Component } from '../component/component.js';
import { ProviderCapabilities } from '../hypervisor/provider-capabilities.js';
import { bootstrapMaterialPath, vmPaths } from '../vms/vm-paths.js';
import { CheckpointService } from './checkpoint-service.js';
import { CheckpointStore } from './checkpoint-store.js';
import { registerCheckpointRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    checkpoints: CheckpointService;
  }
}

export const CHECKPOINTS_DIR = 'checkpoints';

export function checkpointsComponent(opts: { readyTimeoutMs?: number } = {}): Component {
  return {
    name: 'checkpoints',
    start(ctx) {
      const { config } = ctx;
      const logger = ctx.logger.child({ component: 'checkpoints' });
      const vms = ctx.need('vms');
      const agents = ctx.need('agents');
      const store = new CheckpointStore(join(config.stateDir, CHECKPOINTS_DIR), { logger });
      const registers = [ctx.metrics.registry];
      const handoffs = new Counter({
        name: 'svc_warm_pool_handoffs_total',
        help: 'Warm-pool handoffs, by pool and outcome (completed, failed, empty)',
        labelNames: ['pool', 'outcome'],
        registers,
      });
      const latency = new Histogram({
        name: 'svc_warm_pool_handoff_seconds',
        help: 'Warm-pool handoff time from the claim to the restored agent Ready, seconds',
        labelNames: ['pool'],
        buckets: [0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34, 60],
        registers,
      });
      const refillFailures = new Counter({
        name: 'svc_warm_pool_refill_failures_total',
        help: 'Warm-pool refills that failed (retried with backoff), by pool',
        labelNames: ['pool'],
        registers,
      });
      const service: CheckpointService = new CheckpointService({
        store,
        hypervisor: ctx.need('hypervisor'),
        operations: ctx.need('operations'),
        bootstrap: ctx.need('bootstrap'),
        vms: {
          create: async (req) => (await vms.api.create(req)).operation.id,
          deployAgent: async (name) => (await vms.api.deployAgent(name)).operation.id,
          stopAgent: (name) => vms.localAgents.stop(name).then(() => undefined),
          paths: (name) => {
            const p = vmPaths(config.stateDir, name);
            return {
              dir: p.dir,
              work: p.work,
              certs: p.certs,
              material: bootstrapMaterialPath(p.dir),
              disk: p.disk,
              console: p.console,
              fwCfg: p.fwCfg,
            };
          },
        },
        guestConsumeUrl: config.bootstrapConsumeUrl,
        agent: (vm) => agents.registry.get(vm),
        onAgentChange: (listener) => agents.registry.subscribe(() => listener()),
        logger,
        ...(opts.readyTimeoutMs !== undefined && { readyTimeoutMs: opts.readyTimeoutMs }),
        onHandoff: (pool, outcome, seconds) => {
          handoffs.inc({ pool, outcome });
          if (outcome === 'completed') latency.observe({ pool }, seconds);
        },
        onRefillFailure: (pool) => refillFailures.inc({ pool }),
      });
      new Gauge({
        name: 'svc_warm_pool_size',
        help: 'Slots each warm pool is refilled to (target_size)',
        labelNames: ['pool'],
        registers,
        collect() {
          for (const p of service.pools()) this.set({ pool: p.pool }, p.target_size);
        },
      });
      new Gauge({
        name: 'svc_warm_pool_ready_slots',
        help: 'Ready slots (checkpoints waiting for a handoff) of each warm pool',
        labelNames: ['pool'],
        registers,
        collect() {
          for (const p of service.pools()) this.set({ pool: p.pool }, p.ready_slots);
        },
      });
      ctx.provide('checkpoints', service);
      service.start();
      return Promise.resolve({
        routes: (router) =>
          registerCheckpointRoutes(router, {
            service,
            identity: ctx.need('operatorIdentity'),
            capabilities: new ProviderCapabilities(ctx.need('hypervisor'), {
              guestConsumeUrl: config.bootstrapConsumeUrl,
              withheld: config.withheldCapabilities,
            }),
          }),
        stop: () => {
          service.stop();
          store.close();
          return Promise.resolve();
        },
      });
    },
  };
}
