/**
 * The composition root: builds every component from the Config, starts them in order, and
 * stops them in reverse within a deadline. `runServe` is what `sandboxd serve` runs; tests use
 * `startServer` to run the whole server in-process on port 0.
 */
import { cpus } from 'node:os';
import type { Logger } from 'pino';
import { ActorSystem } from '../actors/runtime/actor-system.js';
import { JobPool } from '../actors/jobs/job-pool.js';
import { AGENT_ACTOR_MODULE, AgentService } from './agents/agent-service.js';
import { registerAgentRoutes } from './agents/routes.js';
import { registerDashboardRoutes } from './server/dashboard.js';
import { registerEventRoutes } from './events/routes.js';
import { registerHealthRoutes } from './server/health.js';
import { registerHypervisorHealthRoute } from './server/hypervisor-health.js';
import { registerLegacyProxyRoutes } from './server/legacy-proxy.js';
import { registerMetricsRoute } from './server/metrics.js';
import { registerStorageRoutes } from './storage/routes.js';
import { OUTPUT_ACTOR_MODULE, startOutputFanout, type OutputFanout } from './streaming/output-fanout.js';
import { ConfigError, loadConfig } from './config/load.js';
import { formatAddress } from './config/parsers.js';
import type { Config } from './config/schema.js';
import { SvcError } from './core/errors.js';
import { Readiness } from './core/readiness.js';
import { EventStore } from './events/event-store.js';
import { LibvirtHypervisor } from './hypervisor/libvirt/libvirt-hypervisor.js';
import { ensureCa } from './identity/ca.js';
import { IDENTITY_JOBS_MODULE } from './identity/identity-jobs.js';
import { InboxQuota } from './storage/inbox-quota.js';
import { Storage } from './storage/storage.js';
import { AgentCommandClient } from './agents/command-client.js';
import { wireSessions } from './sessions/wiring.js';
import { TASK_JOBS_MODULE } from './tasks/task-jobs.js';
import { startTaskService, type TaskService } from './tasks/task-service.js';
import { registryAgentLookup } from './vms/agent-lookup.js';
import { startVmService, VM_ACTOR_MODULE, type VmService } from './vms/vm-service.js';
import { Router } from './http/router.js';
import { startHttpListener, uwsRuntimeInfo } from './http/uws-server.js';
import { startWsListener } from './http/ws-server.js';
import { countErrorLines, createLogger } from './observability/log.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { withDeadline } from './util/deadline.js';
import { errorMessage } from './util/error-message.js';

export interface ServerHandle {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly readiness: Readiness;
  readonly events: EventStore;
  readonly agents: AgentService;
  readonly vms: VmService;
  readonly hypervisor: LibvirtHypervisor;
  readonly tasks: TaskService;
  /** Bound ports (useful when the config asked for port 0). */
  readonly ports: { readonly http: number; readonly ws: number; readonly grpc: number };
  /** Stops everything in reverse start order; idempotent; bounded by config.shutdownDeadlineMs. */
  stop(): Promise<void>;
}

/** Modules defining the actor types every shard hosts. */
const ACTOR_MODULES: readonly URL[] = [AGENT_ACTOR_MODULE, VM_ACTOR_MODULE, OUTPUT_ACTOR_MODULE];

interface Stoppable {
  name: string;
  stop: () => Promise<void>;
}

/**
 * Starts the server. On failure, whatever already started is stopped before the promise rejects.
 */
export async function startServer(config: Config, logger: Logger): Promise<ServerHandle> {
  const startedAtMs = Date.now();
  const readiness = new Readiness();
  for (const c of ['actors', 'http', 'ws', 'grpc', 'vms', 'tasks']) readiness.expect(c);
  const metrics = createMetrics();
  const events = new EventStore();
  const agents = new AgentService({ config, logger, metrics, events });
  // Frames emitted by actors go to the first subsystem that claims them; set as subsystems start.
  let vms: VmService | undefined;
  let fanout: OutputFanout | undefined;
  let tasks: TaskService | undefined;
  const started: Stoppable[] = [];
  // Every error- and fatal-level line counts into svc_errors_logged_total, until the last stop.
  const stopCountingErrors = countErrorLines(logger, metrics.errorsLoggedTotal);
  started.push({ name: 'error-count', stop: () => Promise.resolve(stopCountingErrors()) });
  const stopAll = async (): Promise<void> => {
    for (const s of started.splice(0).reverse()) {
      try {
        await s.stop();
      } catch (err) {
        logger.error({ err, component: s.name }, 'component did not stop cleanly');
      }
    }
  };

  try {
    const uws = uwsRuntimeInfo();
    logger.info({ uws }, uws.native ? 'uWebSockets.js native build loaded' : 'uWebSockets.js fell back to its JS implementation');

    const actors = await ActorSystem.start({
      mode: config.actorsMode,
      shards: config.actorShards,
      actorModules: ACTOR_MODULES,
      ringBytes: config.actorRingBytes,
      ring: config.actorRing,
      logger: logger.child({ component: 'actors' }),
      onEmit: (kind, key, payload) => {
        if (fanout?.onEmit(kind, key, payload) === true) return;
        if (agents.onEmit(kind, key, payload)) return;
        if (vms?.handleFrame(kind, key, payload) === true) return;
        logger.warn({ kind, key }, 'frame from an actor that no subsystem claims');
      },
      onShardRestart: (shardIndex, lost) => {
        metrics.actorShardRestartsTotal.inc();
        logger.error({ shardIndex, lostActors: lost.length }, 'actor shard crashed and was restarted');
        agents.onShardRestart(shardIndex, lost);
        vms?.handleShardRestart(shardIndex, lost);
      },
    });
    started.push({ name: 'actors', stop: () => actors.stop({ deadlineMs: Math.max(500, config.shutdownDeadlineMs / 2) }) });
    agents.bindActors(actors);
    const output = await startOutputFanout({
      actors,
      agents,
      logger: logger.child({ component: 'output' }),
      metrics,
      replay: { ringBytes: config.replayRingBytes, budgetBytes: config.replayBudgetBytes, retentionMs: config.replayRetentionSeconds * 1000 },
      sseQueueBytes: config.sseSubscriberQueueBytes,
    });
    fanout = output;
    started.push({ name: 'output', stop: () => output.stop() });
    // CPU-bound work of the features (hashing, archive reading, certificates, manifests) runs here, off the main thread.
    const jobs = await JobPool.start({
      mode: config.actorsMode,
      threads: Math.max(1, Math.min(2, cpus().length - 1)),
      jobModules: [TASK_JOBS_MODULE, IDENTITY_JOBS_MODULE],
      logger: logger.child({ component: 'jobs' }),
    });
    started.push({ name: 'jobs', stop: () => jobs.stop() });
    readiness.ready('actors');

    const hypervisor = new LibvirtHypervisor({
      uris: config.hypervisorUris,
      readBudgetMs: config.hypervisorReadBudgetMs,
      writeBudgetMs: config.hypervisorWriteBudgetMs,
      failureThreshold: config.hypervisorFailureThreshold,
      coolDownMs: config.hypervisorCooldownMs,
      pollIntervalMs: config.hypervisorPollIntervalMs,
      virshEvents: config.hypervisorVirshEvents,
      domainType: config.hypervisorDomainType,
      logger: logger.child({ component: 'hypervisor' }),
    });
    await hypervisor.start();
    started.push({ name: 'hypervisor', stop: () => hypervisor.stop() });

    const storage = new Storage({ rootDir: config.storageDir, maxDownloadBytes: config.storageMaxDownloadBytes });
    const inboxQuota = new InboxQuota({ inboxesDir: storage.inboxesDir(), quotaBytes: config.inboxQuotaBytes, gauge: metrics.agentshareInboxBytes });
    inboxQuota.start();
    started.push({ name: 'inbox-quota', stop: () => Promise.resolve(inboxQuota.stop()) });

    const router = new Router();
    registerHealthRoutes(router, {
      readiness: () => readiness.state(),
      startedAtMs,
      agentCount: () => agents.connectedCount(),
      activeTasks: () => tasks?.activeCount() ?? 0,
      uws: uwsRuntimeInfo,
      actors: () => {
        const s = actors.stats();
        return { mode: s.mode, shards: s.shards, restarts: s.restarts };
      },
    });
    registerMetricsRoute(router, metrics);
    registerEventRoutes(router, { events });
    registerAgentRoutes(router, {
      registry: agents.registry,
      reprovision: (id) => vms?.reprovision(id) ?? Promise.reject(new SvcError('server.not_ready', 'VMs are still starting')),
    });
    registerLegacyProxyRoutes(router, { enabled: config.enableDirectSshOrchProxy });
    registerHypervisorHealthRoute(router, { hypervisor });
    registerStorageRoutes(router, { storage });
    output.registerRoutes(router);

    // Sessions publish their URLs, which need the HTTP listener's real port (port 0 in tests).
    const commandClient = new AgentCommandClient(actors, agents);
    started.push({ name: 'command-client', stop: () => Promise.resolve(commandClient.stop()) });
    let httpPort = config.httpAddr.port;
    const httpBase = (scheme: 'http' | 'ws'): string => `${scheme}://${formatAddress({ host: config.httpAddr.host, port: httpPort })}`;
    const sessions = wireSessions({
      agents,
      actors,
      commandClient,
      stateDir: config.stateDir,
      urls: {
        get httpBaseUrl() {
          return httpBase('http');
        },
        get wsBaseUrl() {
          return httpBase('ws');
        },
      },
      emit: (e) => events.append(e),
      metrics,
      logger: logger.child({ component: 'sessions' }),
    });
    started.push({ name: 'sessions', stop: () => sessions.stop() });
    sessions.registerRoutes(router);

    const http = await startHttpListener({
      host: config.httpAddr.host,
      port: config.httpAddr.port,
      router,
      logger: logger.child({ component: 'http' }),
      maxBodyBytes: config.maxBodyBytes,
      metrics,
      wsRoutes: sessions.wsRoutes,
    });
    httpPort = http.port;
    started.push({ name: 'http', stop: () => http.close() });
    readiness.ready('http');

    const ws = await startWsListener({
      host: config.wsAddr.host,
      port: config.wsAddr.port,
      logger: logger.child({ component: 'ws' }),
      handlers: output.wsHandlers,
      maxBackpressureBytes: output.wsMaxBackpressureBytes,
    });
    output.attachWs(ws);
    started.push({ name: 'ws', stop: () => ws.close() });
    registerDashboardRoutes(router, { wsAddress: () => ({ host: config.wsAddr.host, port: ws.port }) });
    readiness.ready('ws');

    const grpc = await agents.start();
    started.push({ name: 'grpc', stop: () => agents.stop() });
    readiness.ready('grpc');

    // VMs start after gRPC is bound: their local agents dial it. They stop before it (reverse order),
    // so every local agent is down before the listener and the actors go.
    const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain, jobs });
    const vmService = await startVmService({
      hypervisor,
      actors,
      events,
      agents: registryAgentLookup(agents.registry),
      grpcAddress: { host: config.grpcAddr.host, port: grpc.port },
      caProvider: () => Promise.resolve(ca),
      logger: logger.child({ component: 'vms' }),
      stateDir: config.stateDir,
      enableDirectRuntimeSsh: config.enableDirectRuntimeSsh,
      writeBudgetMs: config.hypervisorWriteBudgetMs,
      agentConnectTimeoutMs: config.vmAgentConnectTimeoutSeconds * 1000,
      operationRetentionMs: config.operationRetentionSeconds * 1000,
      containerImagesFile: config.containerImagesFile,
      stopDeadlineMs: Math.max(1000, Math.floor(config.shutdownDeadlineMs / 2)),
      qemu: {
        ...(config.vmBaseImage !== null ? { baseImage: config.vmBaseImage } : {}),
        network: config.vmNetwork,
        ...(config.vmAgentServerAddr !== null ? { agentServer: config.vmAgentServerAddr } : {}),
      },
      metricsRegistry: metrics.registry,
    });
    vms = vmService;
    started.push({ name: 'vms', stop: () => vmService.stop() });
    vmService.registerRoutes(router);
    readiness.ready('vms');

    const taskService = await startTaskService({
      logger: logger.child({ component: 'tasks' }),
      metrics,
      events,
      stateDir: config.stateDir,
      storage,
      vms: vmService,
      agents,
      actors,
      hypervisor,
      agentCommand: config.taskAgentCommand,
      jobs,
      maxConcurrent: config.taskMaxConcurrent,
      stopDeadlineMs: Math.max(1000, Math.floor(config.shutdownDeadlineMs / 2)),
    });
    tasks = taskService;
    started.push({ name: 'tasks', stop: () => taskService.stop() });
    taskService.registerRoutes(router);
    readiness.ready('tasks');

    let stopping: Promise<void> | undefined;
    return {
      config,
      logger,
      metrics,
      readiness,
      events,
      agents,
      vms: vmService,
      hypervisor,
      tasks: taskService,
      ports: { http: http.port, ws: ws.port, grpc: grpc.port },
      stop: () => {
        stopping ??= (async () => {
          readiness.beginShutdown();
          await withDeadline(stopAll(), config.shutdownDeadlineMs, 'shutdown');
        })();
        return stopping;
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/**
 * `sandboxd serve`: config from the environment, logging, start, then wait for SIGTERM/SIGINT.
 * Resolves with the exit code once the server has stopped.
 */
export async function runServe(env: Readonly<Record<string, string | undefined>>): Promise<number> {
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`sandboxd: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const log = createLogger({
    format: config.logFormat,
    level: config.logLevel,
    file: config.logFile,
    rotation: config.logFileRotation,
    retentionDays: config.logFileRetentionDays,
  });
  const logger = log.logger;

  let server: ServerHandle;
  try {
    server = await startServer(config, logger);
  } catch (err) {
    logger.fatal({ err }, 'sandboxd failed to start');
    await log.flush().catch(() => undefined);
    process.stderr.write(`sandboxd: failed to start: ${errorMessage(err)}\n`);
    return 1;
  }

  const httpUrl = `http://${formatAddress({ host: config.httpAddr.host, port: server.ports.http })}/`;
  const wsUrl = `ws://${formatAddress({ host: config.wsAddr.host, port: server.ports.ws })}/`;
  const grpcAddress = formatAddress({ host: config.grpcAddr.host, port: server.ports.grpc });
  logger.info({ http: httpUrl, ws: wsUrl, grpc: grpcAddress, stateDir: config.stateDir }, 'sandboxd ready');
  process.stdout.write(`sandboxd ready: API and dashboard ${httpUrl}  WebSocket ${wsUrl}  agents (gRPC, mTLS) ${grpcAddress}\n`);

  return new Promise<number>((resolve) => {
    let signalled = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (signalled) {
        process.stderr.write(`sandboxd: second ${signal}, exiting now\n`);
        process.exit(130);
      }
      signalled = true;
      logger.info({ signal, deadlineMs: config.shutdownDeadlineMs }, 'shutting down');
      server.stop().then(
        async () => {
          logger.info('stopped');
          await log.flush().catch(() => undefined);
          resolve(0);
        },
        async (err: unknown) => {
          logger.error({ err }, 'shutdown did not complete within its deadline');
          await log.flush(1000).catch(() => undefined);
          resolve(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
