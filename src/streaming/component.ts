/**
 * The output component: the fanout of agent output and chat (GET /api/v1/agent-output/stream and
 * /chat, the output-shard actors' frame kinds) and the WebSocket listener (SVC_WS_ADDR) whose
 * handlers are the fanout's. Listed after the agents component (it subscribes to their commands).
 * Options override the configured replay and queue bounds (tests, the bench).
 */
import { emittedKindsOf } from '../../actors/protocol/frame-kinds.js';
import type { ReplaySettings } from '../../actors/protocol/output-calls.js';
import { framesOf, type Component } from '../component/component.js';
import { startWsListener, type WsListener } from '../http/ws-server.js';
import { OUTPUT_ACTOR_MODULE, startOutputFanout, type OutputFanout } from './output-fanout.js';

export interface OutputService {
  readonly fanout: OutputFanout;
  readonly ws: WsListener;
}

declare module '../component/component.js' {
  interface Services {
    output: OutputService;
  }
}

export interface OutputComponentOptions {
  /** Replay settings over the configured ones (SVC_REPLAY_*). */
  readonly replay?: Partial<ReplaySettings>;
  /** Default SVC_SSE_SUBSCRIBER_QUEUE_BYTES. */
  readonly sseQueueBytes?: number;
  /** Default the fanout's (4 MiB). */
  readonly wsSlowCloseBytes?: number;
}

export function outputComponent(o: OutputComponentOptions = {}): Component {
  return {
    name: 'output',
    readiness: ['ws'],
    actorModules: [OUTPUT_ACTOR_MODULE],
    async start(ctx) {
      const { config } = ctx;
      const fanout = await startOutputFanout({
        actors: ctx.need('actors'),
        agents: ctx.need('agents'),
        logger: ctx.logger.child({ component: 'output' }),
        metrics: ctx.metrics,
        replay: {
          ringBytes: config.replayRingBytes,
          budgetBytes: config.replayBudgetBytes,
          retentionMs: config.replayRetentionSeconds * 1000,
          ...o.replay,
        },
        sseQueueBytes: o.sseQueueBytes ?? config.sseSubscriberQueueBytes,
        ...(o.wsSlowCloseBytes !== undefined && { wsSlowCloseBytes: o.wsSlowCloseBytes }),
      });
      let ws: WsListener;
      try {
        ws = await startWsListener({
          host: config.wsAddr.host,
          port: config.wsAddr.port,
          logger: ctx.logger.child({ component: 'ws' }),
          handlers: fanout.wsHandlers,
          maxBackpressureBytes: fanout.wsMaxBackpressureBytes,
        });
      } catch (err) {
        await fanout.stop();
        throw err;
      }
      fanout.attachWs(ws);
      ctx.provide('output', { fanout, ws });
      return {
        frames: framesOf(emittedKindsOf('output'), (kind, key, payload) => {
          fanout.onEmit(kind, key, payload);
        }),
        routes: (router) => fanout.registerRoutes(router),
        async stop() {
          await ws.close();
          await fanout.stop();
        },
      };
    },
  };
}
