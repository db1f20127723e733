/**
 * Set-up of the streaming integration tests: the real server parts assembled the way src/main.ts
 * wires them (ActorSystem with the agent and output-shard actors, AgentService with its mTLS gRPC
 * listener, the output fanout, the HTTP and WS listeners on uWS), ports 0, a temporary state dir,
 * and helpers to run commands on real sandbox-agent processes.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { agentActorId } from '../../actors/protocol/agent-frames.js';
import { ActorSystem } from '../../actors/runtime/actor-system.js';
import type { ReplaySettings } from '../../actors/protocol/output-calls.js';
import { AGENT_ACTOR_MODULE, AgentService } from '../../src/agents/agent-service.js';
import { registerMetricsRoute } from '../../src/server/metrics.js';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { EventStore } from '../../src/events/event-store.js';
import { ensureCa, writeAgentBundle, type CaMaterial } from '../../src/identity/ca.js';
import { Router } from '../../src/http/router.js';
import { startHttpListener, type HttpListener } from '../../src/http/uws-server.js';
import { startWsListener, type WsListener } from '../../src/http/ws-server.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { OUTPUT_ACTOR_MODULE, startOutputFanout, type OutputFanout } from '../../src/streaming/output-fanout.js';
import { spawnAgent, waitFor, type AgentProcess } from './agents-harness.js';

export interface StreamingServer {
  readonly config: Config;
  readonly dir: string;
  readonly ca: CaMaterial;
  readonly actors: ActorSystem;
  readonly agents: AgentService;
  readonly fanout: OutputFanout;
  readonly metrics: Metrics;
  readonly http: HttpListener;
  readonly ws: WsListener;
  readonly base: string;
  readonly wsUrl: string;
  readonly grpcTarget: string;
  /** Starts a sandbox-agent process for `agentId` (instance `i-<agentId>`) and waits until it is Ready. */
  agent(agentId: string, opts?: { server?: string }): Promise<AgentProcess>;
  /** Runs `sh -c script` on the agent as command `commandId` (no Exec: output only reaches the fanout and the tap). */
  run(agentId: string, commandId: string, script: string, extra?: Record<string, unknown>): Promise<void>;
  /** Resolves with the command's exit code once its result reached the main thread. */
  result(commandId: string, timeoutMs?: number): Promise<number>;
  metricsText(): Promise<string>;
  stop(): Promise<void>;
}

export interface StreamingServerOptions {
  replay?: Partial<ReplaySettings>;
  sseQueueBytes?: number;
  wsSlowCloseBytes?: number;
  env?: Record<string, string>;
}

export async function startStreamingServer(opts: StreamingServerOptions = {}): Promise<StreamingServer> {
  const dir = await mkdtemp(join(tmpdir(), 'sandboxd-streaming-'));
  const config = loadConfig({
    SVC_STATE_DIR: dir,
    SVC_HTTP_ADDR: '127.0.0.1:0',
    SVC_WS_ADDR: '127.0.0.1:0',
    SVC_GRPC_ADDR: '127.0.0.1:0',
    SVC_ACTOR_SHARDS: '2',
    SVC_AGENT_HEARTBEAT_SECONDS: '1',
    LOG_LEVEL: 'silent',
    SVC_ACTORS: process.env['TEST_SVC_ACTORS'] ?? 'workers',
    ...opts.env,
  });
  const logger = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
  const metrics = createMetrics({ defaultMetrics: false });
  const events = new EventStore();
  const agents = new AgentService({ config, logger, metrics, events });
  const results = new Map<string, number>();
  agents.subscribeCommands((e) => {
    if (e.kind === 'result') results.set(e.command_id, e.exit_code);
  });
  const ref: { fanout?: OutputFanout } = {};
  const actors = await ActorSystem.start({
    mode: config.actorsMode,
    shards: config.actorShards,
    actorModules: [AGENT_ACTOR_MODULE, OUTPUT_ACTOR_MODULE],
    ringBytes: config.actorRingBytes,
    onEmit: (kind, key, payload) => {
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
    ...(opts.wsSlowCloseBytes !== undefined && { wsSlowCloseBytes: opts.wsSlowCloseBytes }),
  });
  const router = new Router();
  fanout.registerRoutes(router);
  registerMetricsRoute(router, metrics);
  const http = await startHttpListener({ host: '127.0.0.1', port: 0, router, logger, metrics });
  const ws = await startWsListener({ host: '127.0.0.1', port: 0, logger, handlers: fanout.wsHandlers, maxBackpressureBytes: fanout.wsMaxBackpressureBytes });
  fanout.attachWs(ws);
  const grpc = await agents.start();
  const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
  const grpcTarget = `127.0.0.1:${grpc.port}`;
  const procs: AgentProcess[] = [];
  const base = `http://127.0.0.1:${http.port}`;
  ref.fanout = fanout;
  const f = fanout;
  let stopped: Promise<void> | undefined;
  return {
    config,
    dir,
    ca,
    actors,
    agents,
    fanout: f,
    metrics,
    http,
    ws,
    base,
    wsUrl: `ws://127.0.0.1:${ws.port}/`,
    grpcTarget,
    async agent(agentId, o = {}) {
      const certs = join(dir, 'certs', `${agentId}-${procs.length}`);
      await writeAgentBundle(certs, ca, { instanceId: `i-${agentId}` });
      const workDir = join(dir, 'work', agentId);
      await mkdir(workDir, { recursive: true });
      const p = spawnAgent({ server: o.server ?? grpcTarget, certs, agentId, instanceId: `i-${agentId}`, workDir });
      procs.push(p);
      await waitFor(`agent ${agentId} ready`, () => agents.registry.get(agentId)?.status === 'Ready', 30_000);
      return p;
    },
    async run(agentId, commandId, script, extra = {}) {
      await actors.call(agentActorId(agentId), 'runCommand', { commandId, command: 'sh', args: ['-c', script], ...extra });
    },
    result(commandId, timeoutMs = 60_000) {
      return waitFor(`result of ${commandId}`, () => results.get(commandId), timeoutMs);
    },
    async metricsText() {
      return await (await fetch(`${base}/metrics`)).text();
    },
    stop() {
      stopped ??= (async () => {
        for (const p of procs) {
          p.kill('SIGCONT');
          p.kill('SIGKILL');
        }
        await Promise.all(procs.map((p) => p.exited));
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
