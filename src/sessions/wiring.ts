/**
 * The sessions component connected to the real agents server, in one call for src/main.ts:
 *
 *   const sessions = wireSessions({ agents, actors, stateDir: config.stateDir, urls, emit: (e) => events.append(e),
 *                                   metrics, logger: logger.child({ component: 'sessions' }) });
 *   sessions.registerRoutes(router);
 *   startHttpListener({ …, wsRoutes: sessions.wsRoutes });
 *   started.push({ name: 'sessions', stop: () => sessions.stop() });
 *
 * Call it after the ActorSystem started and before the HTTP listener (which takes wsRoutes at
 * start); agents connect only once the gRPC listener is bound, later still, so nothing is missed.
 *
 * What flows where:
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
import { agentActorId } from '../../actors/protocol/agent-frames.js';
import { CONNECTED_STATUSES } from '../core/agent-status.js';
import { AgentCommandClient, type CommandCallPort } from '../agents/command-client.js';
import type { AgentService } from '../agents/agent-service.js';
import type { SessionAgents } from './agent-port.js';
import { CommandClientPort } from './command-client-port.js';
import type { ReconcileMetrics, SessionEvent, SessionReconcileFields } from './reconcile.js';
import type { ReconcileTransport } from './session-reconciler.js';
import type { SessionLogger } from './session-service.js';
import type { SessionUrlBases } from './session-types.js';
import { createSessions, type SessionsComponent, type SessionsOptions } from './sessions-component.js';
import { errorMessage } from '../util/error-message.js';

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
  readonly urls: SessionUrlBases;
  readonly emit: (e: SessionEvent) => void;
  readonly metrics: ReconcileMetrics;
  readonly logger: SessionLogger;
  readonly graceSeconds?: number;
  readonly hub?: SessionsOptions['hub'];
  readonly hitlSettleMs?: number;
  readonly onHitl?: SessionsOptions['onHitl'];
  readonly tmuxSocket?: SessionsOptions['tmuxSocket'];
  readonly isKnownCommand?: SessionsOptions['isKnownCommand'];
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
  const agents: SessionAgents = {
    get(agentId) {
      const a = registry.get(agentId);
      return a === undefined ? undefined : { agentId, instanceId: a.instance_id || agentId, connected: isConnectedStatus(a.status) };
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
    ...(o.hitlSettleMs !== undefined && { hitlSettleMs: o.hitlSettleMs }),
    ...(o.onHitl !== undefined && { onHitl: o.onHitl }),
    ...(o.tmuxSocket !== undefined && { tmuxSocket: o.tmuxSocket }),
    ...(o.isKnownCommand !== undefined && { isKnownCommand: o.isKnownCommand }),
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
