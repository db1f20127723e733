/**
 * The `celld` component (spec 4.13, README "Celld"): readiness discovery, the non-mutating cell
 * commands, mutating cell commands through the effect ledger (`$SVC_STATE_DIR/celld/effects.db`,
 * opened when SVC_CELLD_CELL_ID is set) and reconcile through the fleet inventory; plus the
 * provider-capabilities route. The cell backend is the libvirt cell over the `hypervisor` service;
 * the VM feature (`vms`) applies per-VM effects, the agents registry (`agents`) is read for
 * diagnosis. Listed after `vms` and after the fleet component; the fleet is looked up at each call,
 * so its absence only disables reconcile (503 celld.fleet_unavailable).
 *
 * Metric: `svc_celld_commands_total{action, outcome}`: mutating requests by action (start, stop,
 * destroy, reconcile) and outcome (accepted: an effect started; replayed: the stored answer;
 * refused: the ledger refused it, a conflict or a generation-only replay).
 *
 * Stopping does not wait for running effects: the operations store marks their operations failed
 * (server.restarted) and the ledger marks their entries unknown at the next start.
 */
import { join } from 'node:path';
import { Counter } from 'prom-client';
import type { Component } from '../component/component.js';
import { AGENT_VERSION } from '../guest-agent/version.js';
import { ProviderCapabilities } from '../hypervisor/provider-capabilities.js';
import { CelldService } from './celld-service.js';
import { registerCapabilityRoutes } from './capability-routes.js';
import { EffectLedger } from './effect-ledger.js';
import type { CelldFleetLink } from './fleet-link.js';
import { LibvirtCell } from './libvirt-cell.js';
import { registerCelldRoutes } from './routes.js';

declare module '../component/component.js' {
  interface Services {
    celld: CelldService;
  }
}

export const CELLD_DIR = 'celld';

export interface CelldComponentOptions {
  /** The fleet inventory; default: the `fleet` service, looked up at each call. */
  readonly fleet?: () => CelldFleetLink | undefined;
}

export function celldComponent(opts: CelldComponentOptions = {}): Component {
  return {
    name: 'celld',
    start(ctx) {
      const { config } = ctx;
      const logger = ctx.logger.child({ component: 'celld' });
      const hypervisor = ctx.need('hypervisor');
      const capabilities = new ProviderCapabilities(hypervisor, {
        guestConsumeUrl: config.bootstrapConsumeUrl,
        withheld: config.withheldCapabilities,
      });
      const ledger = config.celldCellId === null ? null : new EffectLedger(join(config.stateDir, CELLD_DIR), { logger });
      const backend = new LibvirtCell({
        hypervisor,
        agents: () => ctx.find('agents')?.registry.list() ?? [],
        lifecycle: (name, action) => ctx.need('vms').api.lifecycle(name, action),
        agentListenerPort: () => ctx.find('agents')?.port ?? 0,
        capabilities,
        baseImage: config.vmBaseImage,
        version: AGENT_VERSION,
      });
      // The fleet component provides `fleet` (src/fleet/port.ts FleetPort, which satisfies
      // CelldFleetLink); looked up by name at each call so either may be listed first.
      const fleet = opts.fleet ?? ((): CelldFleetLink | undefined => ctx.find('fleet'));
      const commands = new Counter({
        name: 'svc_celld_commands_total',
        help: 'Celld mutating requests, by action (start, stop, destroy, reconcile) and outcome (accepted, replayed, refused)',
        labelNames: ['action', 'outcome'],
        registers: [ctx.metrics.registry],
      });
      const service = new CelldService({
        settings: { enabled: config.celldEnabled, cellId: config.celldCellId, secureTransport: config.adminAddr !== null },
        backend,
        ledger,
        operations: ctx.need('operations'),
        fleet,
        logger,
        onCommand: (action, outcome) => commands.inc({ action, outcome }),
      });
      ctx.provide('celld', service);
      const identity = ctx.need('operatorIdentity');
      return Promise.resolve({
        routes: (router) => {
          registerCelldRoutes(router, { service, identity });
          registerCapabilityRoutes(router, { capabilities, identity });
        },
        stop: () => {
          ledger?.close();
          return Promise.resolve();
        },
      });
    },
  };
}
