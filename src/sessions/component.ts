/**
 * The sessions feature: store, registry, HITL detector, session service, reconciler, routes and
 * pty-ws routes, built from its ports (`createSessions`; unit tests pass fake ports), connected to
 * the real agents server (`wireSessions`), and started as the server's sessions component
 * (`sessionsComponent`), listed after the agents and before the HTTP and gRPC listeners: the HTTP
 * listener takes its WebSocket routes at start, and agents connect only once the gRPC listener is
 * bound, later still, so no agent event is missed.
 *
 * What createSessions' caller forwards (all synchronous, cheap when the command is not a session's):
 *   every OutputChunk (any command)     → sessions.service.commandOutput(commandId, seq, data)
 *   every CommandResult                 → sessions.service.commandFinished(commandId, exitCode)
 *   registration accepted               → sessions.agentConnected(agentId)
 *   SessionReport / SessionReconcileAck → sessions.reconciler.reportReceived / ackReceived
 *   stream ended                        → sessions.agentDisconnected(agentId)
 *
 * What wireSessions connects on the agents server:
 * - every command's output / result (AgentService.subscribeCommands) → SessionService
 *   commandOutput / commandFinished (a map lookup for commands that are not a session's);
 * - SessionReport / SessionReconcileAck (AgentService.subscribeSessions, frames 25 and 26) →
 *   the reconciler, whose SessionReconcile goes back through the actor call
 *   `sendSessionReconcile`;
 * - registry changes → agentConnected (a new stream registered: its connected_at changed while
 *   connected) / agentDisconnected (status Disconnected, or the agent was removed).
 *
 * SessionQuery: the agent actor sends SessionQuery {report_all} right after the RegistrationAck
 * and emits session.query_sent itself (once per registration, before its registration snapshot
 * reaches this thread, so the report can never beat the reconciler's run). The reconciler's own
 * query is therefore not sent again and its session.query_sent is not re-emitted.
 */
import { join } from 'node:path';
import { startScreenStates } from '../../actors/terminal/screen-states.js';
import { agentActorId } from '../../actors/protocol/agent-frames.js';
import type { AgentService } from '../agent-link/agent-service.js';
import { AgentCommandClient, type CommandCallPort } from '../agent-link/command-client.js';
import type { Component } from '../component/component.js';
import { CONNECTED_STATUSES } from '../core/agent-status.js';
import type { TmuxSocket } from '../core/tmux-argv.js';
import { listenerUrl, originUrl, publicOrigin, type PublicUrlConfig } from '../http/public-url.js';
import type { Router } from '../http/router.js';
import type { RequestView } from '../http/types.js';
import type { WsRouteOptions } from '../http/ws-route.js';
import { errorMessage } from '../util/error-message.js';
import type { SessionAgentInfo, SessionAgentPort, SessionAgents } from './agent-port.js';
import { CommandClientPort } from './command-client-port.js';
import { registerHitlRoutes } from './hitl-routes.js';
import { HitlService, type HitlRequest } from './hitl.js';
import type { Idempotency } from '../idempotency/idempotency.js';
import { sessionWsRoutes } from './pty-ws-routes.js';
import { A2A_ADVERTISED_OPS, type A2aBindingHandler } from './binding/a2a.js';
import type { ReconcileMetrics, SessionEvent, SessionReconcileFields } from './reconcile.js';
import { registerSessionRoutes } from './routes.js';
import {
  DEFAULT_KEYFRAME_INTERVAL_FRAMES,
  DEFAULT_KEYFRAME_INTERVAL_MS,
  DEFAULT_MAX_OBSERVERS,
  type ScreenStatePort,
} from './session-hub.js';
import { DEFAULT_REPLAY_MIN_FRAMES } from './replay-buffer.js';
import { SessionReconciler, type ReconcileTransport } from './session-reconciler.js';
import { SessionRegistry } from './session-registry.js';
import { SessionService, type SessionLogger, type SessionServiceOptions } from './session-service.js';
import { SessionStore } from './session-store.js';
import type { SessionUrlBases } from './session-types.js';
import { wsSessionsHook } from './ws-sessions-hook.js';

export interface SessionsOptions {
  /** Directory of sessions.db (e.g. `$SVC_STATE_DIR/sessions`); created 0700. */
  readonly stateDir: string;
  readonly agents: SessionAgents;
  readonly port: SessionAgentPort;
  readonly transport: ReconcileTransport;
  /** The server's Idempotency-Key mechanism (the `idempotency` service). */
  readonly idempotency: Idempotency;
  /** The URL bases of a request's caller (see sessionsComponent). */
  readonly urls: (req: RequestView) => SessionUrlBases;
  /** v1 events (EventStore.append fits). */
  readonly emit: (e: SessionEvent) => void;
  /** svc_session_reconciliations_total, svc_sessions_killed_total (createMetrics() fits). */
  readonly metrics: ReconcileMetrics;
  readonly logger: SessionLogger;
  /** Commands owned elsewhere (tasks) that reconciliation must keep. */
  readonly isKnownCommand?: (commandId: string, sessionId: string) => boolean;
  /** SessionReconcile grace and DELETE grace, seconds. Default 5. */
  readonly graceSeconds?: number;
  readonly hub?: SessionServiceOptions['hub'];
  readonly screen?: ScreenStatePort;
  readonly hitlSettleMs?: number;
  readonly onHitl?: (kind: 'opened' | 'withdrawn' | 'resolved', req: HitlRequest) => void;
  readonly tmuxSocket?: TmuxSocket;
  /** Serves the A2A core ops on pty-ws.v1 (the a2a component's; binding/a2a.ts). */
  readonly a2a?: A2aBindingHandler;
}

export interface SessionsComponent {
  readonly registry: SessionRegistry;
  readonly service: SessionService;
  readonly reconciler: SessionReconciler;
  readonly hitl: HitlService;
  readonly wsRoutes: WsRouteOptions[];
  registerRoutes(router: Router): void;
  /** Registration accepted: hubs learn it, then SessionQuery goes out. */
  agentConnected(agentId: string): void;
  /** Stream ended: sessions detach (never killed), a reconciliation in progress fails. */
  agentDisconnected(agentId: string): void;
  /** Timers off, store closed. Idempotent. */
  stop(): Promise<void>;
}

/** Opens the store (throws when the directory is unusable) and builds the component. */
export function createSessions(o: SessionsOptions): SessionsComponent {
  const store = new SessionStore(o.stateDir, {
    onCorrupt: (what, id, reason) => o.logger.warn({ what, id, reason }, 'skipped a corrupt stored session row'),
  });
  const registry = new SessionRegistry({ store, logger: o.logger });
  const hitl: HitlService = new HitlService({
    writeInput: (sid, data) => service.writeInput(sid, data),
    sessionInfo: (sid) => service.hitlInfo(sid),
    ...(o.hitlSettleMs !== undefined && { settleMs: o.hitlSettleMs }),
    ...(o.onHitl !== undefined && { onChange: o.onHitl }),
  });
  const service: SessionService = new SessionService({
    registry,
    agents: o.agents,
    port: o.port,
    idempotency: o.idempotency,
    hitl,
    metrics: o.metrics,
    emit: o.emit,
    logger: o.logger,
    ...(o.hub !== undefined && { hub: o.hub }),
    ...(o.screen !== undefined && { screen: o.screen }),
    ...(o.tmuxSocket !== undefined && { tmuxSocket: o.tmuxSocket }),
    ...(o.graceSeconds !== undefined && { killGraceSeconds: o.graceSeconds }),
  });
  const reconciler = new SessionReconciler({
    sessions: registry,
    transport: o.transport,
    emit: o.emit,
    metrics: o.metrics,
    onPlan: (agentId, plan) => service.applyPlan(agentId, plan),
    ...(o.graceSeconds !== undefined && { graceSeconds: o.graceSeconds }),
    ...(o.isKnownCommand !== undefined && { isKnownCommand: o.isKnownCommand }),
  });
  let stopped = false;
  return {
    registry,
    service,
    reconciler,
    hitl,
    wsRoutes: sessionWsRoutes({
      hub: (id) => service.hub(id),
      agentHub: (instanceId, sessionId, create) => service.agentHub(instanceId, sessionId, create),
      hostReady: (instanceId, sessionId) => service.hostReady(instanceId, sessionId),
      params: {
        keyframeIntervalFrames: o.hub?.keyframeIntervalFrames ?? DEFAULT_KEYFRAME_INTERVAL_FRAMES,
        keyframeIntervalSeconds: Math.max(1, Math.round((o.hub?.keyframeIntervalMs ?? DEFAULT_KEYFRAME_INTERVAL_MS) / 1000)),
        replayFrames: o.hub?.replay?.minFrames ?? DEFAULT_REPLAY_MIN_FRAMES,
        maxObservers: DEFAULT_MAX_OBSERVERS,
        ...(o.a2a !== undefined && { a2aOperations: A2A_ADVERTISED_OPS }),
      },
      ...(o.a2a !== undefined && { a2a: o.a2a }),
    }),
    registerRoutes(router) {
      registerSessionRoutes(router, { sessions: service, urls: o.urls });
      registerHitlRoutes(router, { hitl });
    },
    agentConnected(agentId) {
      service.agentConnected(agentId);
      reconciler.agentRegistered(agentId);
    },
    agentDisconnected(agentId) {
      reconciler.agentDisconnected(agentId);
      service.agentDisconnected(agentId);
    },
    stop() {
      if (!stopped) {
        stopped = true;
        reconciler.stop();
        hitl.stop();
        store.close();
      }
      return Promise.resolve();
    },
  };
}

/** Events the agent actor emits itself (see the file comment): not emitted twice. */
const ACTOR_EMITTED = new Set(['session.query_sent']);

export interface WireSessionsOptions {
  readonly agents: Pick<AgentService, 'registry' | 'subscribeCommands' | 'subscribeSessions'>;
  /** The ActorSystem (control calls to `agent:<id>` actors). */
  readonly actors: CommandCallPort;
  /** Shared command facade; one is made (and stopped with the component) when absent. */
  readonly commandClient?: AgentCommandClient;
  /** $SVC_STATE_DIR: sessions.db goes to `<stateDir>/sessions`. */
  readonly stateDir: string;
  readonly idempotency: Idempotency;
  readonly urls: SessionsOptions['urls'];
  readonly emit: (e: SessionEvent) => void;
  readonly metrics: ReconcileMetrics;
  readonly logger: SessionLogger;
  readonly graceSeconds?: number;
  readonly hub?: SessionsOptions['hub'];
  readonly screen?: ScreenStatePort;
  readonly hitlSettleMs?: number;
  readonly onHitl?: SessionsOptions['onHitl'];
  readonly tmuxSocket?: SessionsOptions['tmuxSocket'];
  readonly isKnownCommand?: SessionsOptions['isKnownCommand'];
  readonly a2a?: A2aBindingHandler;
}

export interface WiredSessions extends SessionsComponent {
  readonly port: CommandClientPort;
}

function isConnectedStatus(status: string): boolean {
  return (CONNECTED_STATUSES as readonly string[]).includes(status);
}

/** Builds the sessions component on the real agents server. Throws when the store cannot open. */
export function wireSessions(o: WireSessionsOptions): WiredSessions {
  const registry = o.agents.registry;
  const connected = (agentId: string): boolean => isConnectedStatus(registry.get(agentId)?.status ?? 'Disconnected');
  const info = (a: { id: string; instance_id: string; status: string }): SessionAgentInfo => ({
    agentId: a.id,
    instanceId: a.instance_id || a.id,
    connected: isConnectedStatus(a.status),
  });
  const agents: SessionAgents = {
    get(agentId) {
      const a = registry.get(agentId);
      return a === undefined ? undefined : info({ ...a, id: agentId });
    },
    byInstance(instanceId) {
      for (const id of registry.ids()) {
        const a = registry.get(id);
        if (a !== undefined && (a.instance_id || id) === instanceId) return info({ ...a, id });
      }
      return undefined;
    },
  };
  const ownClient = o.commandClient === undefined;
  const client = o.commandClient ?? new AgentCommandClient(o.actors, o.agents);
  const port = new CommandClientPort({ client, actors: o.actors, connected, logger: o.logger });
  const call = (agentId: string, method: string, args: unknown): void => {
    o.actors.call(agentActorId(agentId), method, args).catch((err: unknown) => {
      o.logger.warn({ agent: agentId, method, err: errorMessage(err) }, 'session reconcile call failed');
    });
  };
  const transport: ReconcileTransport = {
    // The actor already sent it at registration (file comment).
    sendSessionQuery: () => undefined,
    sendSessionReconcile: (agentId: string, r: SessionReconcileFields) => call(agentId, 'sendSessionReconcile', r),
  };
  const component = createSessions({
    stateDir: join(o.stateDir, 'sessions'),
    idempotency: o.idempotency,
    agents,
    port,
    transport,
    urls: o.urls,
    emit: (e) => {
      if (!ACTOR_EMITTED.has(e.event_type)) o.emit(e);
    },
    metrics: o.metrics,
    logger: o.logger,
    ...(o.graceSeconds !== undefined && { graceSeconds: o.graceSeconds }),
    ...(o.hub !== undefined && { hub: o.hub }),
    ...(o.screen !== undefined && { screen: o.screen }),
    ...(o.hitlSettleMs !== undefined && { hitlSettleMs: o.hitlSettleMs }),
    ...(o.onHitl !== undefined && { onHitl: o.onHitl }),
    ...(o.tmuxSocket !== undefined && { tmuxSocket: o.tmuxSocket }),
    ...(o.isKnownCommand !== undefined && { isKnownCommand: o.isKnownCommand }),
    ...(o.a2a !== undefined && { a2a: o.a2a }),
  });

  const disconnected = (agentId: string): void => {
    port.agentDisconnected(agentId);
    component.agentDisconnected(agentId);
  };
  // connected_at of the stream each connected agent was last seen registered on.
  const streams = new Map<string, number>();
  const unsubscribers = [
    registry.subscribe((change) => {
      if (change.kind === 'removed') {
        if (streams.delete(change.agentId)) disconnected(change.agentId);
        return;
      }
      const a = change.agent;
      const seen = streams.get(a.id);
      if (isConnectedStatus(a.status)) {
        if (seen === a.connected_at) return;
        // A new stream replaced one we never saw end: end that one first.
        if (seen !== undefined) disconnected(a.id);
        streams.set(a.id, a.connected_at);
        component.agentConnected(a.id);
      } else if (seen !== undefined) {
        streams.delete(a.id);
        disconnected(a.id);
      }
    }),
    o.agents.subscribeCommands((e) => {
      if (e.kind === 'output') {
        if (e.stream !== 'log') component.service.commandOutput(e.commandId, e.seq, e.data);
      } else if (e.kind === 'result') component.service.commandFinished(e.command_id, e.exit_code);
    }),
    o.agents.subscribeSessions((e) => {
      if (e.kind === 'report') component.reconciler.reportReceived(e.agentId, e);
      else component.reconciler.ackReceived(e.agentId, e);
    }),
  ];

  let stopping: Promise<void> | undefined;
  return {
    ...component,
    port,
    stop() {
      stopping ??= (async () => {
        for (const u of unsubscribers) u();
        if (ownClient) client.stop();
        await component.stop();
      })();
      return stopping;
    },
  };
}

declare module '../component/component.js' {
  interface Services {
    sessions: WiredSessions;
  }
}

/** Options of the sessions component beyond the config (tests). */
export type SessionsComponentOptions = Pick<
  WireSessionsOptions,
  'graceSeconds' | 'hub' | 'hitlSettleMs' | 'onHitl' | 'tmuxSocket' | 'isKnownCommand'
>;

export function sessionsComponent(o: SessionsComponentOptions = {}): Component {
  return {
    name: 'sessions',
    start(ctx) {
      const { config } = ctx;
      const events = ctx.need('events');
      // The caller's URLs (src/http/public-url.ts): its Host (or a trusted proxy's forwarded
      // headers), the listeners' bound ports (port 0 in tests) only as the last resort.
      const publicUrls: PublicUrlConfig = {
        trustedProxies: config.trustedProxies,
        listener: () => ({ host: config.httpAddr.host, port: ctx.find('http')?.port ?? config.httpAddr.port }),
      };
      const urls = (req: RequestView): SessionUrlBases => {
        const origin = publicOrigin(req, publicUrls);
        return {
          httpBaseUrl: originUrl(origin),
          wsBaseUrl: listenerUrl(origin, 'ws', ctx.find('output')?.ws.port ?? config.wsAddr.port),
        };
      };
      // Keyframes: one worker holds a headless terminal per session (actors/terminal/).
      const screens = startScreenStates({ logger: ctx.logger.child({ component: 'screen-states' }) });
      // The A2A core ops on pty-ws.v1, when the a2a component (listed before this one) runs.
      const a2a = ctx.find('a2a')?.binding;
      const sessions = wireSessions({
        ...(a2a !== undefined && { a2a }),
        screen: screens,
        agents: ctx.need('agents'),
        actors: ctx.need('actors'),
        stateDir: config.stateDir,
        idempotency: ctx.need('idempotency'),
        urls,
        emit: (e) => events.append(e),
        metrics: ctx.metrics,
        logger: ctx.logger.child({ component: 'sessions' }),
        ...o,
      });
      ctx.provide('sessions', sessions);
      // The WS listener's fleet and session messages (the reference dashboard's, join_session):
      // their callers reached the WS listener, so the HTTP URLs take the HTTP listener's port.
      const output = ctx.find('output');
      const agents = ctx.need('agents');
      output?.fanout.setSessionsHook(
        wsSessionsHook({
          service: sessions.service,
          registry: sessions.registry,
          agents: () => agents.registry.list(),
          urls: (req) => {
            const origin = publicOrigin(req, publicUrls);
            return { httpBaseUrl: listenerUrl(origin, 'http', publicUrls.listener().port), wsBaseUrl: originUrl(origin, 'ws') };
          },
        }),
      );
      return Promise.resolve({
        routes: (router) => sessions.registerRoutes(router),
        wsRoutes: sessions.wsRoutes,
        stop: async () => {
          output?.fanout.setSessionsHook(undefined);
          await sessions.stop();
          await screens.stop();
        },
      });
    },
  };
}
