/**
 * The agents component of the server: the mTLS gRPC listener (Connect and Exec), the
 * agent-connection actors' frames routed back to where they belong (registry, event store,
 * metrics, agent streams, Exec calls), and the read model GET /api/v1/agents serves.
 *
 * Wiring (src/main.ts): construct before the ActorSystem; list AGENT_ACTOR_MODULE in its
 * actorModules; route its onEmit through `onEmit` and its onShardRestart through
 * `onShardRestart`; `bindActors` once it runs; `start` binds the listener.
 */
import type { Logger } from 'pino';
import {
  AgentFrameKind,
  agentIdOfActor,
  decodeJson,
  decodeOutputFrame,
  OutputStream,
  type AgentActorInit,
  type AgentEventFrame,
  type AgentMetricFrame,
  type AgentSnapshot,
  type CommandGapFrame,
  type CommandResultFrame,
  type OutputFrame,
  type OutputStreamName,
  type SessionReconcileAckFrame,
  type SessionReportFrame,
} from '../../actors/protocol/agent-frames.js';
import { parseCommandKey } from '../../actors/protocol/publish-frames.js';
import type { Config } from '../config/schema.js';
import type { EventStore } from '../events/event-store.js';
import { ensureCa } from '../identity/ca.js';
import { isLoopbackHost } from '../config/parsers.js';
import type { Metrics } from '../observability/metrics.js';
import type { ActorPort } from '../../actors/runtime/actor-lane.js';
import { AgentMetrics } from './agent-metrics.js';
import { AgentRegistry } from './agent-registry.js';
import { AgentStreams } from './agent-streams.js';
import { ExecCalls } from './exec-calls.js';
import { startGrpcListener, type GrpcListener } from './grpc-server.js';
import { errorMessage } from '../util/error-message.js';

/** The actor module to list in ActorSystem's actorModules. */
export const AGENT_ACTOR_MODULE: URL = new URL('../../actors/agent-connection/agent-connection.actor.js', import.meta.url);

/** What subscribeSessions listeners see: an agent's SessionReport or SessionReconcileAck. */
export type SessionMessageEvent = ({ kind: 'report' } & SessionReportFrame) | ({ kind: 'reconcile_ack' } & SessionReconcileAckFrame);

/** What subscribeCommands listeners see (every command of every agent, in order per command). */
export type CommandEvent =
  | {
      kind: 'output';
      commandId: string;
      stream: OutputStreamName;
      seq: number;
      offset: number;
      eof: boolean;
      timestampMs: number;
      data: Buffer;
    }
  | ({ kind: 'gap' } & CommandGapFrame)
  | ({ kind: 'result' } & CommandResultFrame);

/**
 * What subscribeOutput listeners see: every accepted chunk as it crossed from the agent actor,
 * once (the output fanout encodes its events from it). `frame.data` and `frame.carry` are views
 * into the ring, valid only during the call.
 */
export type OutputListener = (agentId: string, commandId: string, frame: OutputFrame) => void;

const STREAM_NAMES: Record<number, OutputStreamName> = {
  [OutputStream.stdout]: 'stdout',
  [OutputStream.stderr]: 'stderr',
  [OutputStream.log]: 'log',
};

export interface AgentServiceOptions {
  readonly config: Pick<
    Config,
    | 'trustDomain'
    | 'secretsDir'
    | 'grpcAddr'
    | 'agentHeartbeatSeconds'
    | 'agentStaleAfterSeconds'
    | 'agentRetentionSeconds'
    | 'execDefaultTimeoutSeconds'
    | 'shutdownDeadlineMs'
  >;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly events: EventStore;
  /** Exec: extra time after timeout_seconds before the server gives up on a result (ms). */
  readonly execGraceMs?: number;
}

export class AgentService {
  readonly registry: AgentRegistry;
  readonly agentMetrics: AgentMetrics;
  readonly #opts: AgentServiceOptions;
  readonly #log: Logger;
  readonly #streams: AgentStreams;
  readonly #execs: ExecCalls;
  /** Main-side retention of agents whose actor was lost with a crashed shard. */
  readonly #orphanTimers = new Map<string, NodeJS.Timeout>();
  readonly #commandListeners = new Set<(e: CommandEvent) => void>();
  readonly #outputListeners = new Set<OutputListener>();
  readonly #sessionListeners = new Set<(e: SessionMessageEvent) => void>();
  readonly #keyIds = new Map<string, { agentId: string; commandId: string }>();
  #actors: ActorPort | undefined;
  #listener: GrpcListener | undefined;
  #stopping: Promise<void> | undefined;

  constructor(opts: AgentServiceOptions) {
    this.#opts = opts;
    this.#log = opts.logger.child({ component: 'agents' });
    const cfg = opts.config;
    this.registry = new AgentRegistry({ metrics: opts.metrics });
    this.agentMetrics = new AgentMetrics(opts.metrics);
    const actorInit = (agentId: string): AgentActorInit => ({
      agentId,
      heartbeatIntervalSeconds: cfg.agentHeartbeatSeconds,
      staleAfterMs: cfg.agentStaleAfterSeconds * 1000,
      retentionMs: cfg.agentRetentionSeconds * 1000,
    });
    this.#streams = new AgentStreams({
      trustDomain: cfg.trustDomain,
      logger: this.#log,
      metrics: this.agentMetrics,
      actorInit,
      onRemoved: (agentId) => this.#forget(agentId),
    });
    this.#execs = new ExecCalls({
      trustDomain: cfg.trustDomain,
      logger: this.#log,
      metrics: this.agentMetrics,
      registry: this.registry,
      actors: () => this.#actors,
      defaultTimeoutSeconds: cfg.execDefaultTimeoutSeconds,
      flow: {
        send: (agentId, commandId, paused) => this.#streams.sendOutputFlow(agentId, commandId, paused),
        liveConnId: (agentId) => this.#streams.liveConnId(agentId),
      },
      ...(opts.execGraceMs !== undefined ? { graceMs: opts.execGraceMs } : {}),
    });
  }

  /** The bound gRPC port (after start). */
  get port(): number {
    return this.#listener?.port ?? 0;
  }

  bindActors(actors: ActorPort): void {
    this.#actors = actors;
    this.#streams.bind(actors);
  }

  /** Creates or loads the CA, then binds the mTLS listener. Rejects when either fails. */
  async start(): Promise<{ port: number }> {
    const cfg = this.#opts.config;
    const host = cfg.grpcAddr.host;
    const serverHosts = host === '0.0.0.0' || host === '::' || isLoopbackHost(host) ? [] : [host];
    const ca = await ensureCa({ secretsDir: cfg.secretsDir, trustDomain: cfg.trustDomain, serverHosts });
    if (ca.created.ca) this.#log.info({ secretsDir: cfg.secretsDir }, 'created the CA');
    this.#listener = await startGrpcListener({
      address: cfg.grpcAddr,
      ca,
      logger: this.#log,
      handlers: { connect: (call) => this.#streams.handleConnect(call), exec: (call) => this.#execs.handleExec(call) },
    });
    return { port: this.#listener.port };
  }

  /** Ends every stream and Exec call, then closes the listener. Idempotent; bounded by shutdownDeadlineMs / 4. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#execs.closeAll('the server is stopping');
      this.#streams.closeAll();
      for (const t of this.#orphanTimers.values()) clearTimeout(t);
      this.#orphanTimers.clear();
      await this.#listener?.close(Math.max(250, this.#opts.config.shutdownDeadlineMs / 4));
    })();
    return this.#stopping;
  }

  /**
   * ActorSystem onEmit for the agent frame kinds; returns false for other kinds (for the caller
   * to route elsewhere). Never throws for a malformed frame: it is logged and dropped.
   */
  onEmit(kind: number, key: string, payload: Uint8Array): boolean {
    try {
      switch (kind) {
        case AgentFrameKind.kFrameSendToAgent:
          this.#streams.deliver(key, payload);
          return true;
        case AgentFrameKind.kFrameAgentClose:
          this.#streams.closeFromActor(key, payload);
          return true;
        case AgentFrameKind.kFrameAgentSnapshot:
          this.#onSnapshot(decodeJson<AgentSnapshot>(payload));
          return true;
        case AgentFrameKind.kFrameAgentEvent:
          this.#opts.events.append(decodeJson<AgentEventFrame>(payload));
          return true;
        case AgentFrameKind.kFrameAgentMetric:
          this.agentMetrics.apply(decodeJson<AgentMetricFrame>(payload));
          return true;
        case AgentFrameKind.kFrameAgentRemoved:
          this.#streams.removeRequested(key);
          return true;
        case AgentFrameKind.kFrameCommandOutput: {
          const ids = this.#commandIds(key);
          const o = decodeOutputFrame(payload);
          if (ids === null || o === null) throw new Error('malformed kFrameCommandOutput');
          this.#execs.onOutput(ids.commandId, o);
          for (const l of this.#outputListeners) l(ids.agentId, ids.commandId, o);
          if (this.#commandListeners.size > 0) this.#tapOutput(ids.commandId, o);
          return true;
        }
        case AgentFrameKind.kFrameCommandGap:
          this.#execs.onGap(key, payload);
          if (this.#commandListeners.size > 0) this.#tap({ kind: 'gap', ...decodeJson<CommandGapFrame>(payload) });
          return true;
        case AgentFrameKind.kFrameCommandResult:
          this.#execs.onResult(key, payload);
          if (this.#commandListeners.size > 0) this.#tap({ kind: 'result', ...decodeJson<CommandResultFrame>(payload) });
          return true;
        case AgentFrameKind.kFrameSessionReport:
          this.#tapSession({ kind: 'report', ...decodeJson<SessionReportFrame>(payload) });
          return true;
        case AgentFrameKind.kFrameSessionReconcileAck:
          this.#tapSession({ kind: 'reconcile_ack', ...decodeJson<SessionReconcileAckFrame>(payload) });
          return true;
        default:
          return false;
      }
    } catch (err) {
      this.#log.error({ kind, key, err: errorMessage(err) }, 'bad frame from an agent actor; dropped');
      return true;
    }
  }

  /**
   * ActorSystem onShardRestart: the listed actors are gone. Their agents are marked Disconnected
   * (agent.disconnected event), their streams end UNAVAILABLE so they reconnect, their Exec calls
   * end UNAVAILABLE; an agent that does not come back is removed after the retention period.
   */
  onShardRestart(shardIndex: number, lostActorIds: readonly string[]): void {
    const lost = new Set(lostActorIds.map(agentIdOfActor).filter((id): id is string => id !== null));
    if (lost.size === 0) return;
    const nowMs = Date.now();
    const reason = `actor shard ${shardIndex} restarted`;
    this.#execs.failAgents(lost, `the server lost this command (${reason}); run it again`);
    this.#streams.actorsLost([...lost]);
    for (const agentId of lost) {
      if (this.registry.markDisconnected(agentId, nowMs) === undefined) continue;
      this.#opts.events.append({ event_type: 'agent.disconnected', agent_id: agentId, details: { reason } });
      this.#scheduleOrphanRemoval(agentId);
    }
    this.#log.error(
      { shardIndex, agents: lost.size },
      'agents lost with a restarted actor shard; their streams were ended so they reconnect',
    );
  }

  /**
   * Agents' SessionReport / SessionReconcileAck messages (the sessions reconciler's input).
   * Returns the unsubscribe function. Listeners must not block; a throwing one is dropped.
   */
  subscribeSessions(listener: (e: SessionMessageEvent) => void): () => void {
    this.#sessionListeners.add(listener);
    return () => this.#sessionListeners.delete(listener);
  }

  /**
   * Every command's output, gaps and results as they arrive (after de-duplication), for
   * observers on the main thread. Returns the unsubscribe function. Listeners must not block.
   */
  subscribeCommands(listener: (e: CommandEvent) => void): () => void {
    this.#commandListeners.add(listener);
    return () => this.#commandListeners.delete(listener);
  }

  /**
   * Every accepted chunk, as the one frame that crossed from the agent actor (views valid only
   * during the call; the output fanout's input). Returns the unsubscribe function. Listeners must
   * not block; one that throws drops that chunk for the listeners after it (logged).
   */
  subscribeOutput(listener: OutputListener): () => void {
    this.#outputListeners.add(listener);
    return () => this.#outputListeners.delete(listener);
  }

  /** Agents for /healthz/deep: those with an open stream. */
  connectedCount(): number {
    return this.registry.connectedCount();
  }

  stats(): {
    streams: number;
    execs: number;
    execPauses: number;
    execBacklogBytes: number;
    execBacklogMaxBytes: number;
    staleWrites: number;
    /** Agent streams paused for ring space, and the frames their lanes hold (agent-streams.ts). */
    ringWaits: { pausedStreams: number; queuedFrames: number };
    latency: ReturnType<AgentMetrics['latency']>;
  } {
    return {
      streams: this.#streams.liveCount,
      execs: this.#execs.size,
      execPauses: this.#execs.pausesSent,
      execBacklogBytes: this.#execs.backlog().bytes,
      execBacklogMaxBytes: this.#execs.backlog().maxBytes,
      staleWrites: this.#streams.staleWrites,
      ringWaits: this.#streams.ringWaits(),
      latency: this.agentMetrics.latency(),
    };
  }

  /** parseCommandKey, remembered per key: every chunk of a command carries the same key. */
  #commandIds(key: string): { agentId: string; commandId: string } | null {
    let ids = this.#keyIds.get(key);
    if (ids === undefined) {
      const parsed = parseCommandKey(key);
      if (parsed === null) return null;
      if (this.#keyIds.size >= 4096) this.#keyIds.clear();
      this.#keyIds.set(key, (ids = parsed));
    }
    return ids;
  }

  #tapOutput(commandId: string, o: OutputFrame): void {
    this.#tap({
      kind: 'output',
      commandId,
      stream: STREAM_NAMES[o.stream] ?? 'log',
      seq: o.seq,
      offset: o.offset,
      eof: o.eof,
      timestampMs: o.timestampMs,
      data: Buffer.from(o.data),
    });
  }

  #tapSession(e: SessionMessageEvent): void {
    for (const l of this.#sessionListeners) {
      try {
        l(e);
      } catch (err) {
        this.#log.error({ err: errorMessage(err) }, 'session listener threw; unsubscribed');
        this.#sessionListeners.delete(l);
      }
    }
  }

  #tap(e: CommandEvent): void {
    for (const l of this.#commandListeners) {
      try {
        l(e);
      } catch (err) {
        this.#log.error({ err: errorMessage(err) }, 'command listener threw; unsubscribed');
        this.#commandListeners.delete(l);
      }
    }
  }

  #onSnapshot(snapshot: AgentSnapshot): void {
    const timer = this.#orphanTimers.get(snapshot.id);
    if (timer !== undefined) {
      clearTimeout(timer);
      this.#orphanTimers.delete(snapshot.id);
    }
    if (!this.registry.apply(snapshot))
      this.#log.warn({ agent: snapshot.id, status: snapshot.status }, 'agent snapshot with an unknown status ignored');
  }

  #scheduleOrphanRemoval(agentId: string): void {
    clearTimeout(this.#orphanTimers.get(agentId));
    const timer = setTimeout(() => {
      this.#orphanTimers.delete(agentId);
      if (this.registry.get(agentId)?.status === 'Disconnected') this.#forget(agentId);
    }, this.#opts.config.agentRetentionSeconds * 1000);
    timer.unref();
    this.#orphanTimers.set(agentId, timer);
  }

  #forget(agentId: string): void {
    if (this.registry.remove(agentId)) this.#log.info({ agent: agentId }, 'agent removed after its retention period');
    this.#opts.events.forgetAgent(agentId);
  }
}
