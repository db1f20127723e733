/**
 * The sessions feature built from its ports in one call: store, registry, HITL detector, session
 * service, reconciler, routes and pty-ws routes. It knows nothing of the agents server; the
 * caller connects it. In the server that caller is wiring.ts (`wireSessions`), which passes the
 * agents server's ports and forwards its events here; unit tests call it with fake ports.
 *
 *   const sessions = createSessions({ stateDir, agents, port, transport, urls, emit, metrics, logger });
 *   sessions.registerRoutes(router);             // POST/GET/DELETE sessions, GET/POST hitl
 *   startHttpListener({ …, wsRoutes: sessions.wsRoutes });
 *   // events the caller forwards (all synchronous, cheap when the command is not a session's):
 *   //   every OutputChunk (any command)     → sessions.service.commandOutput(commandId, seq, data)
 *   //   every CommandResult                 → sessions.service.commandFinished(commandId, exitCode)
 *   //   registration accepted               → sessions.agentConnected(agentId)
 *   //   SessionReport / SessionReconcileAck → sessions.reconciler.reportReceived / ackReceived
 *   //   stream ended                        → sessions.agentDisconnected(agentId)
 *   await sessions.stop();                       // timers off, store closed
 */
import type { Router } from '../http/router.js';
import type { WsRouteOptions } from '../http/ws-route.js';
import { registerHitlRoutes } from './hitl-routes.js';
import { registerSessionRoutes } from './routes.js';
import type { SessionAgentPort, SessionAgents } from './agent-port.js';
import { HitlService, type HitlRequest } from './hitl.js';
import { IdempotencyCache } from './idempotency.js';
import { sessionWsRoutes } from './pty-ws-routes.js';
import type { ReconcileMetrics, SessionEvent } from './reconcile.js';
import type { SessionHubOptions } from './session-hub.js';
import { SessionReconciler, type ReconcileTransport } from './session-reconciler.js';
import { SessionRegistry } from './session-registry.js';
import { SessionService, type SessionLogger } from './session-service.js';
import { SessionStore } from './session-store.js';
import type { SessionUrlBases } from './session-types.js';
import type { TmuxSocket } from '../core/tmux-argv.js';

export interface SessionsOptions {
  /** Directory of sessions.db (e.g. `$SVC_STATE_DIR/sessions`); created 0700. */
  readonly stateDir: string;
  readonly agents: SessionAgents;
  readonly port: SessionAgentPort;
  readonly transport: ReconcileTransport;
  readonly urls: SessionUrlBases;
  /** v1 events (EventStore.append fits). */
  readonly emit: (e: SessionEvent) => void;
  /** svc_session_reconciliations_total, svc_sessions_killed_total (createMetrics() fits). */
  readonly metrics: ReconcileMetrics;
  readonly logger: SessionLogger;
  /** Commands owned elsewhere (tasks) that reconciliation must keep. */
  readonly isKnownCommand?: (commandId: string, sessionId: string) => boolean;
  /** SessionReconcile grace and DELETE grace, seconds. Default 5. */
  readonly graceSeconds?: number;
  readonly hub?: Pick<SessionHubOptions, 'maxQueuedBytes' | 'replayBytes' | 'pingIntervalMs' | 'pongTimeoutMs' | 'onSlowClient'>;
  readonly hitlSettleMs?: number;
  readonly onHitl?: (kind: 'opened' | 'withdrawn' | 'resolved', req: HitlRequest) => void;
  readonly tmuxSocket?: TmuxSocket;
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
  const store = new SessionStore(o.stateDir, { onCorrupt: (what, id, reason) => o.logger.warn({ what, id, reason }, 'skipped a corrupt stored session row') });
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
    urls: o.urls,
    idempotency: new IdempotencyCache({ store }),
    hitl,
    metrics: o.metrics,
    emit: o.emit,
    logger: o.logger,
    ...(o.hub !== undefined && { hub: o.hub }),
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
    wsRoutes: sessionWsRoutes({ hub: (id) => service.hub(id) }),
    registerRoutes(router) {
      registerSessionRoutes(router, { sessions: service });
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
