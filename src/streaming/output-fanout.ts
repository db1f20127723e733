/**
 * The output fanout on the main thread (DESIGN "Threads and the data path"): every accepted chunk
 * crosses from its agent actor once, as the kFrameCommandOutput frame Exec calls and the command
 * listeners read too (AgentService.subscribeOutput). For a chunk that someone subscribes to, the
 * fanout encodes its SSE event and its WS message ONCE (actors/protocol/chunk-events.ts, the
 * encoder the replay uses, so a replay repeats the live bytes) and writes the same bytes to every
 * SSE subscriber of the matching topics (SseTopics) and every WS connection subscribed to the
 * agent (uWS publish); a chunk nobody subscribes to is not encoded at all. Gaps and stream ends
 * arrive encoded by the actors (kFrameOutputPublish, actors/protocol/publish-frames.ts). It
 * serves GET /api/v1/agent-output/stream and /chat (agent-output-routes.ts, chat-routes.ts)
 * and the dashboard WebSocket (ws-hub.ts), and owns their metrics (fanout-metrics.ts).
 *
 * Wiring (src/main.ts): list OUTPUT_ACTOR_MODULE in the ActorSystem's actorModules; start it after
 * the ActorSystem and before the gRPC listener; offer every actor frame to `onEmit` first; call
 * `registerRoutes(router)`; start the WS listener with `wsHandlers` and `wsMaxBackpressureBytes`
 * and pass it to `attachWs`; stop it before the actors.
 */
import type { Logger } from 'pino';
import { encodeStreamEndSse } from '../../actors/protocol/output-events.js';
import { OutputStream, type OutputFrame, type OutputStreamName } from '../../actors/protocol/agent-frames.js';
import { chunkBase64, encodeChunkSse, encodeChunkWs } from '../../actors/protocol/chunk-events.js';
import { formatOutputCursor } from '../../actors/protocol/output-cursor.js';
import {
  decodeChatPublish,
  commandKey,
  decodeOutputPublish,
  kPublishEnd,
  kPublishGap,
  parseCommandKey,
  PublishFrameKind,
} from '../../actors/protocol/publish-frames.js';
import { OUTPUT_SHARD_ACTOR_TYPE, type ReplaySettings, type ShardReplayStats } from '../../actors/protocol/output-calls.js';
import type { AgentChange } from '../agent-link/agent-registry.js';
import type { Router } from '../http/router.js';
import type { WsHandlers } from '../http/ws-server.js';
import type { Metrics } from '../observability/metrics.js';
import { registerAgentOutputRoutes } from './agent-output-routes.js';
import { registerChatRoutes } from './chat-routes.js';
import { CommandIndex } from './command-index.js';
import { FanoutMetrics } from './fanout-metrics.js';
import { OutputJoins, DEFAULT_JOIN_CALL_TIMEOUT_MS } from './output-join.js';
import { commandScopedTopics, outputPublishTopics, outputPublishTopicsAllStreams } from './output-topics.js';
import { DEFAULT_LIVE_QUEUE_BYTES } from '../http/live-subscriber.js';
import { SseTopics } from './sse-topics.js';
import { WsHub, type JoinSessionHandler, type WsPublisher } from './ws-hub.js';
import type { WsSessionsHook } from './ws-session-messages.js';
import { errorMessage } from '../util/error-message.js';

/** The actor module to list in the ActorSystem's actorModules (the per-shard output service). */
export const OUTPUT_ACTOR_MODULE: URL = new URL('../../actors/replay/output-shard.actor.js', import.meta.url);

/** What the fanout needs from the ActorSystem. */
export interface FanoutActors {
  readonly shards: number;
  shardOf(id: string): number;
  spawn(type: string, id: string, init?: unknown, opts?: { timeoutMs?: number }): Promise<void>;
  call<T = unknown>(id: string, method: string, args?: unknown, opts?: { timeoutMs?: number }): Promise<T>;
}

/** What the fanout needs from the agents component. */
export interface FanoutAgents {
  readonly registry: { subscribe(listener: (change: AgentChange) => void): () => void };
  /** Every accepted chunk: the kFrameCommandOutput frames are the agents component's (views valid during the call). */
  subscribeOutput(listener: (agentId: string, commandId: string, frame: OutputFrame) => void): () => void;
}

export interface OutputFanoutOptions {
  readonly actors: FanoutActors;
  readonly agents: FanoutAgents;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'registry'>;
  /** Replay settings of every shard (defaults: shard-replay.ts DEFAULT_REPLAY_SETTINGS). */
  readonly replay?: Partial<ReplaySettings>;
  /** Bytes an SSE subscriber may fall behind before it is cut off. Default 1 MiB. */
  readonly sseQueueBytes?: number;
  /** Bytes a WS connection may have queued before it is closed as slow. Default 4 MiB. */
  readonly wsSlowCloseBytes?: number;
  /** Bound of one call to an agent actor while a subscriber joins, ms. Default 10 s. */
  readonly callTimeoutMs?: number;
  /** The session of a command, for chat streams without session_id (sessions component). */
  readonly sessionOf?: (commandId: string) => string | undefined;
  readonly joinSession?: JoinSessionHandler;
}

export interface OutputFanout {
  /** GET /api/v1/agent-output/stream and GET /api/v1/agent-output/chat. */
  registerRoutes(router: Router): void;
  /** Handlers for startWsListener. */
  readonly wsHandlers: WsHandlers;
  /** maxBackpressureBytes for startWsListener (uWS's hard limit behind the slow-consumer check). */
  readonly wsMaxBackpressureBytes: number;
  /** The started WS listener. */
  attachWs(ws: WsPublisher): void;
  /** The sessions component's join_session handler. */
  setJoinSessionHandler(handler: JoinSessionHandler | undefined): void;
  /** The sessions component's hook for the WS listener's fleet and session messages (ws-session-messages.ts). */
  setSessionsHook(hook: WsSessionsHook | undefined): void;
  /** ActorSystem onEmit: true when the frame was the fanout's (kinds 34–37). Never throws. */
  onEmit(kind: number, key: string, payload: Uint8Array): boolean;
  /** Open streams, for health and tests. */
  stats(): { sseSubscribers: number; chatSubscribers: number; wsConnections: number; indexedCommands: number };
  /** Ends every SSE stream with stream_end (server_stopping), stops timers. Idempotent. */
  stop(): Promise<void>;
}

const kMaxTopicCacheKeys = 8192;

/**
 * A copy of `bytes` that subscribers may keep: an emitted payload is only valid during onEmit
 * (a view into the shard ring, or in inline mode the actor's scratch buffer). Not `.slice()`: on
 * a Buffer that is a view, not a copy.
 */
function ownedCopy(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(bytes.byteLength);
  out.set(bytes);
  return out;
}

/** Spawns one output-shard actor per shard (configuring its replay settings), then returns the fanout. */
export async function startOutputFanout(opts: OutputFanoutOptions): Promise<OutputFanout> {
  const log = opts.logger;
  const shardActors = shardActorIds(opts.actors);
  await Promise.all(shardActors.map((id) => opts.actors.spawn(OUTPUT_SHARD_ACTOR_TYPE, id, { ...opts.replay }, { timeoutMs: 10_000 })));

  const outputTopics = new SseTopics();
  const chatTopics = new SseTopics();
  const index = new CommandIndex();
  const hubRef: { hub?: WsHub } = {};
  const metrics = new FanoutMetrics(opts.metrics.registry, {
    sseSubscribers: (stream) => (stream === 'chat' ? chatTopics : outputTopics).subscriberCount(),
    wsConnections: () => hubRef.hub?.connectionCount ?? 0,
    replay: async () => {
      const all = await Promise.all(
        shardActors.map((id) => opts.actors.call<ShardReplayStats>(id, 'stats', undefined, { timeoutMs: 1000 })),
      );
      return { ringBytes: all.reduce((n, s) => n + s.ringBytes, 0), rings: all.reduce((n, s) => n + s.rings, 0) };
    },
  });
  const ws = new WsHub({
    logger: log,
    ...(opts.wsSlowCloseBytes !== undefined && { slowCloseBytes: opts.wsSlowCloseBytes }),
    onSlow: () => metrics.slowSubscribers.inc({ transport: 'ws' }),
    ...(opts.joinSession !== undefined && { joinSession: opts.joinSession }),
  });
  hubRef.hub = ws;
  const unsubscribeRegistry = opts.agents.registry.subscribe((change) => ws.onAgentChange(change));
  const unsubscribeOutput = opts.agents.subscribeOutput((agentId, commandId, frame) => {
    try {
      onChunk(agentId, commandId, frame);
    } catch (err) {
      log.error({ agent: agentId, command: commandId, err: errorMessage(err) }, 'output chunk not published');
    }
  });
  const joins = new OutputJoins({
    actors: opts.actors,
    index,
    outputTopics,
    chatTopics,
    metrics,
    logger: log,
    subscriberQueueBytes: opts.sseQueueBytes ?? DEFAULT_LIVE_QUEUE_BYTES,
    callTimeoutMs: opts.callTimeoutMs ?? DEFAULT_JOIN_CALL_TIMEOUT_MS,
    ...(opts.sessionOf !== undefined && { sessionOf: opts.sessionOf }),
  });

  // topics per command key, by stream code (0 = all streams)
  const topicCache = new Map<string, (string[] | undefined)[]>();
  const topicsFor = (
    key: string,
    agentId: string,
    commandId: string,
    code: number,
    stream: 'stdout' | 'stderr' | 'log' | undefined,
  ): string[] => {
    let byStream = topicCache.get(key);
    if (byStream === undefined) {
      if (topicCache.size >= kMaxTopicCacheKeys) topicCache.clear();
      topicCache.set(key, (byStream = []));
    }
    return (byStream[code] ??=
      stream === undefined ? outputPublishTopicsAllStreams(agentId, commandId) : outputPublishTopics(agentId, commandId, stream));
  };

  const subscribed: string[] = [];
  /** One chunk: encoded once per transport that has a subscriber for it, else not at all. */
  const onChunk = (agentId: string, commandId: string, frame: OutputFrame): void => {
    index.learn(agentId, commandId);
    if (frame.clock === 0) return; // not stored by the replay state: not published either
    metrics.countFrame('sse');
    metrics.countFrame('ws');
    const stream: OutputStreamName = frame.stream === OutputStream.stderr ? 'stderr' : frame.stream === OutputStream.log ? 'log' : 'stdout';
    subscribed.length = 0;
    for (const topic of topicsFor(commandKey(agentId, commandId), agentId, commandId, frame.stream, stream))
      if (outputTopics.has(topic)) subscribed.push(topic);
    const toWs = ws.listensToOutput(agentId);
    if (subscribed.length === 0 && !toWs) return;
    const facts = {
      agentId,
      commandId,
      stream,
      seq: frame.seq,
      clock: frame.clock,
      timestampMs: frame.timestampMs,
      eof: frame.eof,
      carry: frame.carry,
      bytes: frame.data,
    };
    const b64 = chunkBase64(frame.data);
    if (subscribed.length > 0) {
      const sse = encodeChunkSse(facts, b64);
      const cursor = formatOutputCursor(frame.clock, frame.seq);
      for (const topic of subscribed) outputTopics.publish(topic, sse, cursor);
    }
    if (toWs) ws.publishOutput(agentId, encodeChunkWs(facts, b64));
  };

  const onOutput = (key: string, payload: Uint8Array): void => {
    const ids = parseCommandKey(key);
    const p = decodeOutputPublish(payload);
    if (ids === null || p === null) throw new Error('malformed kFrameOutputPublish');
    index.learn(ids.agentId, ids.commandId);
    if ((p.flags & kPublishGap) !== 0) metrics.gapsReported.inc({ where: 'live' });
    metrics.countFrame('sse');
    if ((p.flags & kPublishEnd) !== 0) {
      let frame: Uint8Array | undefined;
      for (const topic of commandScopedTopics(ids.agentId, ids.commandId)) {
        if (!outputTopics.has(topic)) continue;
        frame ??= ownedCopy(p.sse);
        outputTopics.publishEnd(topic, frame);
      }
      return;
    }
    const code = payload[1] ?? 0;
    let frame: Uint8Array | undefined;
    for (const topic of topicsFor(key, ids.agentId, ids.commandId, code, p.stream)) {
      if (!outputTopics.has(topic)) continue;
      // One owned copy for all subscribers: the payload is only valid during this call.
      frame ??= ownedCopy(p.sse);
      outputTopics.publish(topic, frame, p.cursor);
    }
  };

  const onChat = (topic: string, payload: Uint8Array): void => {
    const c = decodeChatPublish(payload);
    if (c === null) throw new Error('malformed kFrameChatPublish');
    if (!chatTopics.has(topic)) return;
    const frame = ownedCopy(c.frame);
    if (c.terminal) chatTopics.publishEnd(topic, frame);
    else chatTopics.publish(topic, frame, c.cursor);
  };

  let stopping: Promise<void> | undefined;
  return {
    registerRoutes(router) {
      registerAgentOutputRoutes(router, { join: (sink, q) => joins.joinOutput(sink, q) });
      registerChatRoutes(router, { join: (sink, q) => joins.joinChat(sink, q) });
    },
    wsHandlers: ws.handlers,
    wsMaxBackpressureBytes: ws.maxBackpressureBytes,
    attachWs: (listener) => ws.attach(listener),
    setJoinSessionHandler: (h) => ws.setJoinSessionHandler(h),
    setSessionsHook: (h) => ws.setSessionsHook(h),
    onEmit(kind, key, payload) {
      try {
        switch (kind) {
          case PublishFrameKind.kFrameOutputPublish:
            onOutput(key, payload);
            return true;
          case PublishFrameKind.kFrameChatPublish:
            onChat(key, payload);
            return true;
          case PublishFrameKind.kFrameOutputKnown:
          case PublishFrameKind.kFrameOutputForget: {
            const ids = parseCommandKey(key);
            if (ids === null) return true;
            if (kind === PublishFrameKind.kFrameOutputKnown) index.learn(ids.agentId, ids.commandId);
            else {
              index.forget(ids.agentId, ids.commandId);
              topicCache.delete(key);
            }
            return true;
          }
          default:
            return false;
        }
      } catch (err) {
        log.error({ kind, key: key.split('\u0000').join('/'), err: errorMessage(err) }, 'bad frame from the output actors; dropped');
        return true;
      }
    },
    stats: () => ({
      sseSubscribers: outputTopics.subscriberCount(),
      chatSubscribers: chatTopics.subscriberCount(),
      wsConnections: ws.connectionCount,
      indexedCommands: index.size,
    }),
    stop() {
      stopping ??= (async () => {
        unsubscribeRegistry();
        unsubscribeOutput();
        ws.stop();
        outputTopics.closeAll(encodeStreamEndSse({ reason: 'server_stopping' }));
        chatTopics.closeAll();
        await Promise.resolve();
      })();
      return stopping;
    },
  };
}

/** One output-shard actor id per shard: `output-shard:<n>` for the first n that lands in each shard. */
export function shardActorIds(actors: Pick<FanoutActors, 'shards' | 'shardOf'>): string[] {
  const ids = new Array<string | undefined>(actors.shards).fill(undefined);
  let found = 0;
  for (let n = 0; found < actors.shards && n < actors.shards * 1000; n++) {
    const id = `${OUTPUT_SHARD_ACTOR_TYPE}:${n}`;
    const shard = actors.shardOf(id);
    if (ids[shard] === undefined) {
      ids[shard] = id;
      found++;
    }
  }
  return ids.filter((id): id is string => id !== undefined);
}
