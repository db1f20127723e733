/**
 * The VM feature, assembled: per-VM queue actors and their bridge, step executor, provisioner,
 * local agents, VM events, the container image catalog, and the routes (VMs 4.3, container images
 * 4.16). Its operations go to the one operations store it is given (src/operations/component.ts).
 *
 * Wiring it needs from the composition root (src/main.ts):
 * - add VM_ACTOR_MODULE to the ActorSystem's actorModules;
 * - route emitted frames: `onEmit: (k, key, p) => vms.handleFrame(k, key, p) || …others`;
 * - `onShardRestart: (i, lost) => vms.handleShardRestart(i, lost)`;
 * - call `vms.registerRoutes(router)`, and `vms.reprovision(agentId)` from
 *   POST /api/v1/agents/{id}/reprovision (an ordinary operation of this feature's one store);
 * - stop it before the actor system and the hypervisor port (it stops the local agents).
 *
 * On start, whatever an earlier sandboxd that died left running for VMs that no longer run is
 * ended (local agents, their tmux servers and shells), then managed VMs already running on
 * test-driver hosts get their local agents started (a daemon-served test driver or a sandboxd
 * restart keeps VMs; their agents are ours to run).
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ActorSystem } from '../../actors/runtime/actor-system.js';
import { publicTypeOf } from '../../actors/protocol/vm-frames.js';
import { isTerminal, type ReprovisionAcceptedJson } from '../core/operation-state.js';
import { registerContainerImageRoutes } from './container-image-routes.js';
import { registerVmRoutes } from './routes.js';
import { formatAddress, isLoopbackHost, type ListenAddress } from '../config/parsers.js';
import type { Router } from '../http/router.js';
import type { HypervisorPort } from '../hypervisor/port.js';
import { withRetriedReads } from '../hypervisor/retried-reads.js';
import type { CaMaterial } from '../identity/ca.js';
import type { OperationTracker, Operations } from '../operations/operation-tracker.js';
import type { AgentLookup } from './agent-lookup.js';
import { loadContainerImages, type ContainerImage } from './container-images.js';
import { LocalAgentSupervisor } from './local-agents.js';
import { LocalSshdSupervisor, type LocalSshdOptions } from './local-sshd.js';
import { Provisioner, type ProvisionerOptions, type SshEndpoint } from './provisioner.js';
import type { StartupCatalog } from './create-request.js';
import type { QemuOptions } from './qemu-files.js';
import { StepExecutor } from './step-executor.js';
import { VmController, type VmApi } from './vm-controller.js';
import { VmEventBridge, type EventSink } from './vm-events.js';
import { VmOpsBridge } from './vm-ops-bridge.js';
import { processFinderOn } from './vm-jobs.js';
import type { JobRunner } from '../util/job-runner.js';

/** The actor module to list in the ActorSystem's actorModules. */
export const VM_ACTOR_MODULE: URL = new URL('../../actors/vm/vm-ops.actor.js', import.meta.url);

export interface VmServiceOptions {
  hypervisor: HypervisorPort;
  actors: ActorSystem;
  events: EventSink;
  agents: AgentLookup;
  /** sandboxd's gRPC listener (bound address): local agents dial it. */
  grpcAddress: ListenAddress;
  /** The CA that issues agent certificates (ensureCa's result). */
  caProvider: () => Promise<CaMaterial>;
  logger: Logger;
  /** SVC_STATE_DIR: VM files go to <stateDir>/vms/<name>/. */
  stateDir: string;
  /** SVC_STORAGE_DIR: the agent share's inbox and outbox (src/storage/agentshare.ts). */
  storageDir?: string;
  /** SVC_ENABLE_DIRECT_RUNTIME_SSH. */
  enableDirectRuntimeSsh: boolean;
  /** Bound of each hypervisor step, ms (SVC_HYPERVISOR_WRITE_BUDGET_MS). Default 30 000. */
  writeBudgetMs?: number;
  /** How long provisioning waits for a VM's agent to connect, ms. Default 60 000. */
  agentConnectTimeoutMs?: number;
  /** The one operations store (the operations component's service); the VM service neither starts nor stops it. */
  operations: OperationTracker;
  /** A JSON catalog replacing the built-in container images (SVC_CONTAINER_IMAGES_FILE). Default null. */
  containerImagesFile?: string | null;
  /** Path of sandbox-agent.js for local agents (default: this build's). */
  agentBin?: string;
  /** SIGTERM → SIGKILL grace of local agents, ms. Default 5000. */
  localAgentStopGraceMs?: number;
  /** Bound of stop(), ms: at most half of it is the local agents' grace there. Default: no bound beyond that grace. */
  stopDeadlineMs?: number;
  /** qemu hosts: base image, network, and the gRPC address guests dial. */
  qemu?: Partial<QemuOptions>;
  /** Registers svc_vm_operations_total and svc_vm_local_agents here when given. */
  metricsRegistry?: Registry;
  /** At start, end the leftovers of an earlier sandboxd and start the agents of running managed VMs. Default true. */
  resumeAgents?: boolean;
  /**
   * SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH set: local VMs get an sshd trusting this CA, and
   * `debian` image qemu guests created from now on get one (fw_cfg); none when absent.
   */
  localSshd?: Omit<LocalSshdOptions, 'logger'>;
  /** Revokes an instance's unconsumed bootstrap tokens (the `bootstrap` service) when its VM is deleted. */
  revokeBootstrap?: (instanceId: string) => void;
  /** Idle queue actors stop after this long, ms (default 10 minutes). */
  actorIdleStopMs?: number;
  /** The job pool: a stopping local VM's processes are looked for there (vm-jobs.ts). Default: on the main thread. */
  jobs?: JobRunner;
  /** Startup profiles and loadouts a create may name (looked up per request; src/profiles). */
  catalog?: () => StartupCatalog | undefined;
  /** What a VM's loadout and profile give it at provisioning (src/loadouts). */
  loadoutMaterial?: ProvisionerOptions['loadoutMaterial'];
}

export interface VmService {
  readonly api: VmApi;
  readonly operations: Operations;
  readonly localAgents: LocalAgentSupervisor;
  readonly containerImages: readonly ContainerImage[];
  /** Registers the VM and container-image routes. */
  registerRoutes(router: Router): void;
  /**
   * A VM's known SSH address, by name or instance id: its local sshd, or a qemu guest's address
   * and port 22; `{none}` with the reason for a VM without one; null for no such VM.
   */
  sshAddress(instance: string): Promise<SshEndpoint | null>;
  /** Jobs queued or running on a VM, oldest first (diagnostics, tests). */
  queue(vm: string): Promise<{ id: string; kind: string; status: string; progress_percent: number }[]>;
  /** Takes the frames of vm-ops actors; false for anything else. */
  handleFrame(kind: number, key: string, payload: Uint8Array): boolean;
  /** Fails the operations of queue actors lost with a crashed shard. */
  handleShardRestart(shardIndex: number, lostActorIds: readonly string[]): void;
  /**
   * POST /api/v1/agents/{id}/reprovision: queues a deploy-agent of the agent's VM, an ordinary
   * vm_create operation. It never rejects: a reprovision that cannot be queued (no VM runs the
   * agent, the VM is not running or busy) is recorded as a failed operation whose error says why,
   * so the POST answers 202 as the spec shows.
   */
  reprovision(agentId: string): Promise<ReprovisionAcceptedJson>;
  /** Stops taking work, fails running steps, stops every local agent. Idempotent. */
  stop(): Promise<void>;
}

/** Builds and starts the VM feature (see the file comment for the wiring it expects). */
export async function startVmService(o: VmServiceOptions): Promise<VmService> {
  const logger = o.logger.child({ component: 'vms' });
  const writeBudgetMs = o.writeBudgetMs ?? 30_000;
  const containerImages = await loadContainerImages(o.containerImagesFile ?? null);
  const operations = o.operations;
  const store = operations.store;
  const localSshd = o.localSshd === undefined ? null : new LocalSshdSupervisor({ ...o.localSshd, logger });
  const localAgents = new LocalAgentSupervisor({
    server: o.grpcAddress,
    logger,
    ...(localSshd !== null ? { sshd: localSshd } : {}),
    ...(o.agentBin !== undefined ? { agentBin: o.agentBin } : {}),
    ...(o.localAgentStopGraceMs !== undefined ? { stopGraceMs: o.localAgentStopGraceMs } : {}),
    ...(o.jobs !== undefined ? { findProcesses: processFinderOn(o.jobs) } : {}),
  });
  const qemu: QemuOptions = {
    baseImage: o.qemu?.baseImage ?? null,
    network: o.qemu?.network ?? 'default',
    // libvirt's default network reaches the host at 192.168.122.1; a loopback listener is not reachable from guests.
    agentServer:
      o.qemu?.agentServer ?? (isLoopbackHost(o.grpcAddress.host) ? `192.168.122.1:${o.grpcAddress.port}` : formatAddress(o.grpcAddress)),
    ...(o.qemu?.qemuImgPath !== undefined ? { qemuImgPath: o.qemu.qemuImgPath } : {}),
  };
  // Background work rides out a late read (src/hypervisor/retried-reads.ts); API reads do not.
  const stepHypervisor = withRetriedReads(o.hypervisor);
  const provisioner = new Provisioner({
    hypervisor: stepHypervisor,
    stateDir: o.stateDir,
    caProvider: o.caProvider,
    localAgents,
    agents: o.agents,
    qemu,
    writeBudgetMs,
    logger,
    gatewaySsh: o.localSshd ?? null,
    ...(o.revokeBootstrap !== undefined && { revokeBootstrap: o.revokeBootstrap }),
    ...(o.loadoutMaterial !== undefined && { loadoutMaterial: o.loadoutMaterial }),
    ...(o.storageDir !== undefined && { storageDir: o.storageDir }),
  });
  const eventBridge = new VmEventBridge({ hypervisor: o.hypervisor, events: o.events, localAgents, provisioner, logger });
  const opsTotal =
    o.metricsRegistry === undefined
      ? null
      : new Counter({
          name: 'svc_vm_operations_total',
          help: 'VM operations finished, by type and final status',
          labelNames: ['type', 'status'] as const,
          registers: [o.metricsRegistry],
        });
  if (o.metricsRegistry !== undefined) {
    new Gauge({
      name: 'svc_vm_local_agents',
      help: 'Local sandbox-agent processes running for test-driver VMs',
      registers: [o.metricsRegistry],
      collect() {
        this.set(localAgents.list().filter((a) => a.running).length);
      },
    });
  }
  const bridge = new VmOpsBridge({
    actors: o.actors,
    executor: new StepExecutor(stepHypervisor, provisioner),
    store,
    budgets: { stepTimeoutMs: writeBudgetMs, agentConnectTimeoutMs: o.agentConnectTimeoutMs ?? 60_000 },
    logger,
    ...(o.actorIdleStopMs !== undefined ? { actorInit: { idleStopMs: o.actorIdleStopMs } } : {}),
    onJob: (s, previous) => {
      eventBridge.onJob(s, previous);
      const type = publicTypeOf(s.type);
      if (type !== null && isTerminal(s.status)) opsTotal?.inc({ type, status: s.status });
    },
  });
  const controller = new VmController({
    hypervisor: o.hypervisor,
    bridge,
    agents: o.agents,
    // start = start + agentUp; delete = undefine + agentDown + purge: three steps at most, plus queueing.
    syncTimeoutMs: 3 * writeBudgetMs + 10_000,
  });
  eventBridge.start();
  if (o.resumeAgents !== false) {
    await provisioner
      .reapLeftovers()
      .catch((err: unknown) => logger.warn({ err }, 'could not look for processes an earlier sandboxd left running'));
    const started = await provisioner.resumeRunningAgents(AbortSignal.timeout(writeBudgetMs)).catch((err: unknown) => {
      logger.warn({ err }, 'could not list running VMs to start their agents');
      return [];
    });
    if (started.length > 0) logger.info({ vms: started }, 'started the agents of running VMs');
  }

  let stopping: Promise<void> | undefined;
  return {
    api: controller,
    operations,
    localAgents,
    containerImages,
    registerRoutes(router) {
      registerVmRoutes(router, {
        vms: controller,
        directRuntimeSsh: o.enableDirectRuntimeSsh,
        ...(o.catalog !== undefined && { catalog: o.catalog }),
      });
      registerContainerImageRoutes(router, { images: () => containerImages });
    },
    sshAddress: async (instance) => localSshd?.address(instance) ?? (await provisioner.sshEndpoint(instance)),
    queue: async (vm) =>
      (await bridge.status(vm)).map((j) => ({ id: j.id, kind: j.type, status: j.status, progress_percent: j.progressPercent })),
    handleFrame: (kind, key, payload) => bridge.handleFrame(kind, key, payload),
    handleShardRestart: (_shardIndex, lost) => bridge.handleShardRestart(lost),
    async reprovision(agentId) {
      let target = agentId;
      try {
        target = await controller.vmOfAgent(agentId);
        return { operation_id: (await controller.deployAgent(target)).operation.id, status: 'queued' };
      } catch (err) {
        const op = operations.refuse('vm_create', target, err);
        logger.warn({ operation: op.id, agent: agentId, err }, 'reprovision refused; recorded as a failed operation');
        return { operation_id: op.id, status: 'queued' };
      }
    },
    stop() {
      stopping ??= (async () => {
        bridge.stop();
        eventBridge.stop();
        await localAgents.stopAll(o.stopDeadlineMs === undefined ? {} : { graceMs: Math.max(100, Math.floor(o.stopDeadlineMs / 2)) });
      })();
      return stopping;
    },
  };
}
