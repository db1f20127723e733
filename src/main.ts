/**
 * The composition root: a list of components and one loop that starts any subset of them in
 * order, wires what each answers (routes, WebSocket routes, a handler per actor frame kind, shard
 * restarts) and stops them in reverse within the shutdown deadline. The contract is
 * src/component/component.ts. `runServe` is what `sandboxd serve` runs; tests and the bench call
 * `startServer` with the whole list or the part they exercise, ports 0.
 */
import { a2aComponent } from './a2a/component.js';
import type { Logger } from 'pino';
import { activityComponent } from './activity/component.js';
import { activitySelfCollectorComponent } from './activity/self-collector-component.js';
import { agentListenerComponent, agentsComponent } from './agent-link/component.js';
import { adminListenerComponent, authComponent } from './auth/component.js';
import { bootstrapComponent } from './bootstrap/component.js';
import { checkpointsComponent } from './checkpoints/component.js';
import { celldComponent } from './celld/component.js';
import { idempotencyComponent } from './idempotency/component.js';
import type { Component, ComponentContext, FrameHandler, Services } from './component/component.js';
import { ConfigError, loadConfig } from './config/load.js';
import { formatAddress } from './config/parsers.js';
import type { Config } from './config/schema.js';
import { credentialsComponent } from './credentials/component.js';
import { operationsComponent } from './operations/component.js';
import { Readiness } from './core/readiness.js';
import { eventsComponent } from './events/component.js';
import { gatewaySshComponent } from './gateway/ssh/component.js';
import { mcpComponent } from './mcp/component.js';
import { sshConnectorComponent } from './gateway/ssh/connector-component.js';
import type { WsRouteOptions } from './http/ws-route.js';
import { Router } from './http/router.js';
import { uwsRuntimeInfo } from './http/uws-server.js';
import { countErrorLines, createLogger } from './observability/log.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { actorsComponent, hypervisorComponent, httpComponent, jobsComponent } from './server/runtime-components.js';
import { serverRoutesComponent } from './server/server-routes.js';
import { sessionsComponent } from './sessions/component.js';
import { storageComponent } from './storage/component.js';
import { outputComponent } from './streaming/component.js';
import { tasksComponent } from './tasks/component.js';
import { vmsComponent } from './vms/component.js';
import { withDeadline } from './util/deadline.js';
import { errorMessage } from './util/error-message.js';
import { loadoutsComponent } from './loadouts/component.js';
import { profilesComponent } from './profiles/component.js';
import { fleetComponent, fleetInventoryComponent } from './fleet/component.js';
import { desktopComponent } from './desktop/component.js';
import { missionsComponent } from './missions/component.js';
import { orchestrationComponent } from './orchestration/component.js';

/**
 * The whole server, in start order. Operator identity comes first (every v2 route resolves its
 * caller with it), the Idempotency-Key middleware next (it must be on the router before any route
 * it covers), the events store, the activity store (sandboxd's own collector right after it:
 * it stops after everything it records and before the store closes), the operations store (VMs
 * and the v2 admin features record there; it closes after them), and the actors next (everything
 * uses them); sessions come before the HTTP listener (it takes their WebSocket
 * routes), the admin listener (mTLS) right after it, bootstrap enrollment after them (its consume
 * URL names the HTTP port; VMs stage enrollments with it), and all before the gRPC listener (no agent
 * connects before its listeners subscribed); VMs after it (their local agents dial it), checkpoints and warm pools (they
 * create, save and restore VMs), tasks
 * (they use VMs), the MCP server (its tools use all of these), and the SSH connector last (it finds VMs' SSH addresses; it stops first).
 * Stopping runs the list backwards.
 */
export const DEFAULT_COMPONENTS: readonly Component[] = [
  authComponent,
  idempotencyComponent,
  eventsComponent(),
  activityComponent(),
  activitySelfCollectorComponent(),
  operationsComponent(),
  actorsComponent,
  agentsComponent,
  outputComponent(),
  jobsComponent,
  hypervisorComponent,
  storageComponent,
  credentialsComponent(),
  gatewaySshComponent(),
  serverRoutesComponent,
  // A2A (issue 23 items 3, 4; README "A2A"): before sessions, which takes its pty-ws.v1 handler at start
  a2aComponent(),
  sessionsComponent(),
  httpComponent,
  adminListenerComponent,
  bootstrapComponent(),
  agentListenerComponent,
  // fleet: the request hooks must be installed before the VM and checkpoint routes are registered
  fleetInventoryComponent(),
  vmsComponent(),
  checkpointsComponent(),
  fleetComponent(),
  tasksComponent(),
  mcpComponent(),
  sshConnectorComponent(),
  // startup profiles and loadouts (issue 21): vms looks them up per request
  loadoutsComponent,
  profilesComponent,
  // Celld (README "Celld"): after vms and the fleet; it looks both up at each call
  celldComponent(),
  // managed desktop sessions (README "Managed desktop sessions"): its own listener, off unless SVC_DESKTOP_ADDR is set
  desktopComponent(),
  // missions and dispatch (README "Missions and dispatch"): after the agents listener; runs missions on connected agents
  missionsComponent(),
  // orchestration link and aiwg bridge (README "Orchestration link and aiwg bridge"): last, its
  // register message names the bound ports; it stops first
  orchestrationComponent(),
];

export interface StartOptions {
  /** The components to start, in order. Default {@link DEFAULT_COMPONENTS}. */
  readonly components?: readonly Component[];
  /** The registry every component counts into. Default createMetrics() (with the process metrics). */
  readonly metrics?: Metrics;
}

export interface ServerHandle {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly readiness: Readiness;
  /** Every route of the started components (inject() drives it without sockets). */
  readonly router: Router;
  /** A started component's service; throws naming it when no listed component provides it. */
  service<K extends keyof Services>(name: K): Services[K];
  /** The same, undefined when no listed component provides it. */
  find<K extends keyof Services>(name: K): Services[K] | undefined;
  readonly events: Services['events'];
  readonly agents: Services['agents'];
  readonly vms: Services['vms'];
  readonly hypervisor: Services['hypervisor'];
  readonly tasks: Services['tasks'];
  /** Bound ports (useful when the config asked for port 0); 0 for a listener not started. */
  readonly ports: { readonly http: number; readonly ws: number; readonly grpc: number; readonly admin: number };
  /** Stops everything in reverse start order; idempotent; bounded by config.shutdownDeadlineMs. */
  stop(): Promise<void>;
}

/**
 * Starts the components in order. A component needing a service no earlier one provides, or two
 * claiming one frame kind, is a start-up error. On failure, whatever already started is stopped
 * before the promise rejects.
 */
export async function startServer(config: Config, logger: Logger, opts: StartOptions = {}): Promise<ServerHandle> {
  const components = opts.components ?? DEFAULT_COMPONENTS;
  const readiness = new Readiness();
  for (const c of components) for (const name of c.readiness ?? []) readiness.expect(name);
  const metrics = opts.metrics ?? createMetrics();
  const router = new Router();
  const wsRoutes: WsRouteOptions[] = [];
  const services = new Map<string, { service: unknown; by: string }>();
  const frames = new Map<number, { handler: FrameHandler; by: string }>();
  const restartHooks: ((shardIndex: number, lost: readonly string[]) => void)[] = [];
  const started: { name: string; stop: () => Promise<void> }[] = [];
  let starting = '';
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
  const find = <K extends keyof Services>(name: K): Services[K] | undefined => services.get(name)?.service as Services[K] | undefined;
  const service = <K extends keyof Services>(name: K): Services[K] => {
    const s = find(name);
    if (s === undefined)
      throw new Error(
        `${starting === '' ? 'the server' : `component ${starting}`} needs ${name}, which no component listed before it provides`,
      );
    return s;
  };
  const ctx: ComponentContext = {
    config,
    logger,
    metrics,
    readiness,
    startedAtMs: Date.now(),
    actorModules: components.flatMap((c) => c.actorModules ?? []),
    dispatchFrame: (kind, key, payload) => {
      const f = frames.get(kind);
      if (f !== undefined) f.handler(kind, key, payload);
      else logger.warn({ kind, key }, 'frame from an actor that no component claims');
    },
    shardRestarted: (shardIndex, lost) => {
      metrics.actorShardRestartsTotal.inc();
      logger.error({ shardIndex, lostActors: lost.length }, 'actor shard crashed and was restarted');
      for (const hook of restartHooks) hook(shardIndex, lost);
    },
    router,
    wsRoutes,
    need: service,
    find,
    provide: (name, s) => {
      const earlier = services.get(name);
      if (earlier !== undefined) throw new Error(`components ${earlier.by} and ${starting} both provide ${name}`);
      services.set(name, { service: s, by: starting });
    },
  };

  try {
    const uws = uwsRuntimeInfo();
    logger.info({ uws }, uws.native ? 'uWebSockets.js native build loaded' : 'uWebSockets.js fell back to its JS implementation');
    for (const c of components) {
      starting = c.name;
      const s = await c.start(ctx);
      started.push({ name: c.name, stop: () => s.stop() });
      for (const [kind, handler] of s.frames ?? []) {
        const earlier = frames.get(kind);
        if (earlier !== undefined) throw new Error(`frame kind ${kind} is claimed by both ${earlier.by} and ${c.name}`);
        frames.set(kind, { handler, by: c.name });
      }
      if (s.onShardRestart !== undefined) restartHooks.push(s.onShardRestart);
      s.routes?.(router);
      wsRoutes.push(...(s.wsRoutes ?? []));
      for (const name of c.readiness ?? []) readiness.ready(name);
    }
    starting = '';
  } catch (err) {
    await stopAll();
    throw err;
  }

  let stopping: Promise<void> | undefined;
  return {
    config,
    logger,
    metrics,
    readiness,
    router,
    service,
    find,
    get events() {
      return service('events');
    },
    get agents() {
      return service('agents');
    },
    get vms() {
      return service('vms');
    },
    get hypervisor() {
      return service('hypervisor');
    },
    get tasks() {
      return service('tasks');
    },
    ports: {
      http: find('http')?.port ?? 0,
      ws: find('output')?.ws.port ?? 0,
      grpc: find('agents')?.port ?? 0,
      admin: find('adminListener')?.port ?? 0,
    },
    stop: () => {
      stopping ??= (async () => {
        readiness.beginShutdown();
        await withDeadline(stopAll(), config.shutdownDeadlineMs, 'shutdown');
      })();
      return stopping;
    },
  };
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

  // Signal handlers go in before start-up: /healthz answers before startServer resolves, and a
  // SIGTERM in that window must stop the server cleanly, not kill the process with 143.
  let server: ServerHandle | undefined;
  let signalled: NodeJS.Signals | undefined;
  let stopped: Promise<number> | undefined;
  const shutDown = (running: ServerHandle): Promise<number> =>
    (stopped ??= running.stop().then(
      async () => {
        logger.info('stopped');
        await log.flush().catch(() => undefined);
        return 0;
      },
      async (err: unknown) => {
        logger.error({ err }, 'shutdown did not complete within its deadline');
        await log.flush(1000).catch(() => undefined);
        return 1;
      },
    ));
  let onStopped: (code: number) => void = () => undefined;
  const exited = new Promise<number>((resolve) => (onStopped = resolve));
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled !== undefined) {
      process.stderr.write(`sandboxd: second ${signal}, exiting now\n`);
      process.exit(130);
    }
    signalled = signal;
    logger.info({ signal, deadlineMs: config.shutdownDeadlineMs, starting: server === undefined }, 'shutting down');
    if (server !== undefined) void shutDown(server).then(onStopped);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  try {
    server = await startServer(config, logger);
  } catch (err) {
    logger.fatal({ err }, 'sandboxd failed to start');
    await log.flush().catch(() => undefined);
    process.stderr.write(`sandboxd: failed to start: ${errorMessage(err)}\n`);
    return 1;
  }
  if (signalled !== undefined) return shutDown(server);

  const httpUrl = `http://${formatAddress({ host: config.httpAddr.host, port: server.ports.http })}/`;
  const wsUrl = `ws://${formatAddress({ host: config.wsAddr.host, port: server.ports.ws })}/`;
  const grpcAddress = formatAddress({ host: config.grpcAddr.host, port: server.ports.grpc });
  const adminUrl =
    config.adminAddr === null ? null : `https://${formatAddress({ host: config.adminAddr.host, port: server.ports.admin })}/`;
  logger.info({ http: httpUrl, ws: wsUrl, grpc: grpcAddress, admin: adminUrl, stateDir: config.stateDir }, 'sandboxd ready');
  process.stdout.write(
    `sandboxd ready: API and dashboard ${httpUrl}  WebSocket ${wsUrl}  agents (gRPC, mTLS) ${grpcAddress}` +
      `${adminUrl === null ? '' : `  admin (HTTPS, mTLS) ${adminUrl}`}\n`,
  );
  return exited;
}
