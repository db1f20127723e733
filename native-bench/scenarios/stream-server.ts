/**
 * The streaming part of sandboxd, assembled in the bench process the way src/main.ts wires it:
 * ActorSystem (workers or inline) with the agent and output-shard actors, AgentService and its
 * mTLS gRPC listener, the output fanout, the HTTP listener (SSE routes) and the WS listener.
 * Logs are silent; listeners are on 127.0.0.1, ports 0. Agent certificates are issued for the
 * bench client process.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ActorSystem, type ActorMode } from '../../actors/runtime/actor-system.js';
import type { ReplaySettings } from '../../actors/protocol/output-calls.js';
import { AGENT_ACTOR_MODULE, AgentService } from '../../src/agents/agent-service.js';
import { loadConfig } from '../../src/config/load.js';
import { EventStore } from '../../src/events/event-store.js';
import { Router } from '../../src/http/router.js';
import { startHttpListener, type HttpListener } from '../../src/http/uws-server.js';
import { startWsListener, type WsListener } from '../../src/http/ws-server.js';
import { ensureCa, issueAgentCert, type CaMaterial } from '../../src/identity/ca.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { OUTPUT_ACTOR_MODULE, startOutputFanout, type OutputFanout } from '../../src/streaming/output-fanout.js';
import type { SimAgentTls } from './sim-agent.js';

export interface BenchServer {
  readonly mode: ActorMode;
  readonly dir: string;
  readonly ca: CaMaterial;
  readonly actors: ActorSystem;
  readonly agents: AgentService;
  readonly fanout: OutputFanout;
  readonly http: HttpListener;
  readonly ws: WsListener;
  readonly grpcTarget: string;
  /** Issues an agent certificate for `instanceId`; returns the PEM texts. */
  agentTls(instanceId: string): Promise<SimAgentTls>;
  stop(): Promise<void>;
}

export interface BenchServerOptions {
  mode: ActorMode;
  /** Default: cores − 1, at least 1 (DESIGN.md). */
  shards?: number;
  replay?: Partial<ReplaySettings>;
  sseQueueBytes?: number;
  /** Sees every frame the actors emit, before the server handles it (counting). */
  tap?: (kind: number, key: string, payload: Uint8Array) => void;
  heartbeatSeconds?: number;
}

export async function startBenchServer(opts: BenchServerOptions): Promise<BenchServer> {
  const dir = await mkdtemp(join(tmpdir(), 'sandboxd-bench-'));
  const config = loadConfig({
    SVC_STATE_DIR: dir,
    SVC_HTTP_ADDR: '127.0.0.1:0',
    SVC_WS_ADDR: '127.0.0.1:0',
    SVC_GRPC_ADDR: '127.0.0.1:0',
    SVC_ACTORS: opts.mode,
    SVC_ACTOR_SHARDS: String(opts.shards ?? Math.max(1, cpus().length - 1)),
    SVC_AGENT_HEARTBEAT_SECONDS: String(opts.heartbeatSeconds ?? 30),
    LOG_LEVEL: 'silent',
  });
  const logger = pino({ level: 'silent' });
  const metrics = createMetrics({ defaultMetrics: false });
  const agents = new AgentService({ config, logger, metrics, events: new EventStore({ maxEvents: 1000 }) });
  const ref: { fanout?: OutputFanout } = {};
  const tap = opts.tap;
  const actors = await ActorSystem.start({
    mode: config.actorsMode,
    shards: config.actorShards,
    actorModules: [AGENT_ACTOR_MODULE, OUTPUT_ACTOR_MODULE],
    ringBytes: config.actorRingBytes,
    onEmit: (kind, key, payload) => {
      tap?.(kind, key, payload);
      if (ref.fanout?.onEmit(kind, key, payload) === true) return;
      agents.onEmit(kind, key, payload);
    },
    onShardRestart: (shard, lost) => agents.onShardRestart(shard, lost),
  });
  agents.bindActors(actors);
  const fanout = await startOutputFanout({
    actors,
    agents,
    logger,
    metrics,
    ...(opts.replay !== undefined && { replay: opts.replay }),
    ...(opts.sseQueueBytes !== undefined && { sseQueueBytes: opts.sseQueueBytes }),
  });
  const router = new Router();
  fanout.registerRoutes(router);
  const http = await startHttpListener({ host: '127.0.0.1', port: 0, router, logger });
  const ws = await startWsListener({ host: '127.0.0.1', port: 0, logger, handlers: fanout.wsHandlers, maxBackpressureBytes: fanout.wsMaxBackpressureBytes });
  fanout.attachWs(ws);
  const grpc = await agents.start();
  const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
  ref.fanout = fanout;
  const f = fanout;
  let stopped: Promise<void> | undefined;
  return {
    mode: opts.mode,
    dir,
    ca,
    actors,
    agents,
    fanout: f,
    http,
    ws,
    grpcTarget: `127.0.0.1:${grpc.port}`,
    async agentTls(instanceId) {
      const issued = await issueAgentCert(ca, { instanceId });
      return { ca: ca.caCertPem, cert: issued.certPem, key: issued.keyPem };
    },
    stop() {
      stopped ??= (async () => {
        await agents.stop();
        await f.stop();
        await ws.close();
        await http.close();
        await actors.stop();
        await rm(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}
