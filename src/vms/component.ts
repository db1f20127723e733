/**
 * The VM component: the VM service (operation queues on the vm-ops actors, provisioning, local
 * agents) with its routes (VMs, container images), the VM frame kinds and shard restarts. Listed
 * after the gRPC listener: local agents dial it; stopped before it (reverse order), so every local
 * agent is down before the listener and the actors go. Its operations go to the operations
 * component's store; started without that component (tests that start a subset), it opens the
 * same durable store itself, with its routes, and closes it when it stops. Options override what
 * the config decides (tests).
 */
import { emittedKindsOf } from '../../actors/protocol/frame-kinds.js';
import { framesOf, type Component } from '../component/component.js';
import { ensureCa } from '../identity/ca.js';
import { startOperations, type StartedOperations } from '../operations/component.js';
import { registryAgentLookup } from './agent-lookup.js';
import { LocalSshdSupervisor } from './local-sshd.js';
import { startVmService, VM_ACTOR_MODULE, type VmService, type VmServiceOptions } from './vm-service.js';

declare module '../component/component.js' {
  interface Services {
    vms: VmService;
  }
}

/** VmServiceOptions over the ones made from the config and the earlier components. */
export type VmsComponentOptions = Partial<VmServiceOptions>;

export function vmsComponent(o: VmsComponentOptions = {}): Component {
  return {
    name: 'vms',
    readiness: ['vms'],
    actorModules: [VM_ACTOR_MODULE],
    async start(ctx) {
      const { config } = ctx;
      const jobs = ctx.find('jobs');
      const agents = o.agents === undefined ? ctx.need('agents') : undefined;
      const ca =
        o.caProvider === undefined
          ? await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain, ...(jobs !== undefined && { jobs }) })
          : undefined;
      const sshd =
        config.gatewaySshCaPublicKeyHostPath === null
          ? null
          : {
              caPublicKeyPath: config.gatewaySshCaPublicKeyHostPath,
              user: config.gatewaySshAuthorizedUser,
              principals: config.gatewaySshAuthorizedPrincipals,
            };
      if (sshd !== null) await LocalSshdSupervisor.check(sshd);
      let ownOperations: StartedOperations | undefined;
      const operations = o.operations ?? ctx.find('operations') ?? (ownOperations = startOperations(ctx)).operations;
      const vms = await startVmService({
        hypervisor: ctx.need('hypervisor'),
        actors: ctx.need('actors'),
        events: ctx.need('events'),
        agents: agents === undefined ? { byVm: () => null } : registryAgentLookup(agents.registry),
        grpcAddress: { host: config.grpcAddr.host, port: agents?.port ?? config.grpcAddr.port },
        caProvider: () => (ca === undefined ? Promise.reject(new Error('no CA')) : Promise.resolve(ca)),
        logger: ctx.logger.child({ component: 'vms' }),
        stateDir: config.stateDir,
        storageDir: config.storageDir,
        enableDirectRuntimeSsh: config.enableDirectRuntimeSsh,
        writeBudgetMs: config.hypervisorWriteBudgetMs,
        agentConnectTimeoutMs: config.vmAgentConnectTimeoutSeconds * 1000,
        operations,
        containerImagesFile: config.containerImagesFile,
        stopDeadlineMs: Math.max(1000, Math.floor(config.shutdownDeadlineMs / 2)),
        qemu: {
          ...(config.vmBaseImage !== null ? { baseImage: config.vmBaseImage } : {}),
          network: config.vmNetwork,
          ...(config.vmAgentServerAddr !== null ? { agentServer: config.vmAgentServerAddr } : {}),
        },
        metricsRegistry: ctx.metrics.registry,
        revokeBootstrap: (instanceId) => void ctx.find('bootstrap')?.revokeInstance(instanceId),
        ...(sshd !== null && { localSshd: sshd }),
        ...(jobs !== undefined && { jobs }),
        // Looked up per use: the profiles and loadouts components start after this one.
        catalog: () => ctx.find('profiles')?.catalog,
        loadoutMaterial: (loadout, profile) => ctx.find('profiles')?.material(loadout, profile) ?? null,
        ...o,
      }).catch((err: unknown) => {
        ownOperations?.stop();
        throw err;
      });
      ctx.provide('vms', vms);
      return {
        frames: framesOf(emittedKindsOf('vm'), (kind, key, payload) => {
          vms.handleFrame(kind, key, payload);
        }),
        onShardRestart: (shardIndex, lost) => vms.handleShardRestart(shardIndex, lost),
        routes: (router) => {
          ownOperations?.routes(router);
          vms.registerRoutes(router);
        },
        stop: async () => {
          await vms.stop();
          ownOperations?.stop();
        },
      };
    },
  };
}
