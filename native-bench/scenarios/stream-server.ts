/**
 * The streaming part of sandboxd in the bench process: startServer with the events, actors,
 * agents, output (fanout and WS listener), HTTP and gRPC listener components, the actors in
 * workers or inline; `tap` wraps the agents' and output's frame handlers to count what they see.
 * Logs are silent; listeners are on 127.0.0.1, ports 0. Agent certificates are issued for the
 * bench client process.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { ReplaySettings } from '../../actors/protocol/output-calls.js';
import type { ActorMode, ActorSystem } from '../../actors/runtime/actor-system.js';
import type { AgentService } from '../../src/agent-link/agent-service.js';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import type { Component, FrameHandler } from '../../src/component/component.js';
import { eventsComponent } from '../../src/events/component.js';
import type { HttpListener } from '../../src/http/uws-server.js';
import type { WsListener } from '../../src/http/ws-server.js';
import { ensureCa, issueAgentCert, type CaMaterial } from '../../src/identity/ca.js';
import { startServer } from '../../src/main.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { actorsComponent, httpComponent } from '../../src/server/runtime-components.js';
import { outputComponent } from '../../src/streaming/component.js';
import type { OutputFanout } from '../../src/streaming/output-fanout.js';
import { loopbackConfig } from '../../test/support/test-config.js';
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

/** `c` with `tap` seeing each frame it claims before its handler does. */
function tapped(c: Component, tap: FrameHandler): Component {
  return {
    ...c,
    async start(ctx) {
      const started = await c.start(ctx);
      if (started.frames === undefined) return started;
      const frames = new Map(
        [...started.frames].map(([kind, handle]): [number, FrameHandler] => [
          kind,
          (k, key, payload) => {
            tap(k, key, payload);
            handle(k, key, payload);
          },
        ]),
      );
      return { ...started, frames };
    },
  };
}

export async function startBenchServer(opts: BenchServerOptions): Promise<BenchServer> {
  const dir = await mkdtemp(join(tmpdir(), 'sandboxd-bench-'));
  const config = loopbackConfig(dir, {
    SVC_ACTORS: opts.mode,
    SVC_ACTOR_SHARDS: String(opts.shards ?? Math.max(1, cpus().length - 1)),
    SVC_AGENT_HEARTBEAT_SECONDS: String(opts.heartbeatSeconds ?? 30),
  });
  const tap = opts.tap;
  const withTap = (c: Component): Component => (tap === undefined ? c : tapped(c, tap));
  const output = outputComponent({
    ...(opts.replay !== undefined && { replay: opts.replay }),
    ...(opts.sseQueueBytes !== undefined && { sseQueueBytes: opts.sseQueueBytes }),
  });
  const server = await startServer(config, pino({ level: 'silent' }), {
    components: [
      eventsComponent({ maxEvents: 1000 }),
      actorsComponent,
      withTap(agentsComponent),
      withTap(output),
      httpComponent,
      agentListenerComponent,
    ],
    metrics: createMetrics({ defaultMetrics: false }),
  });
  const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
  const { fanout, ws } = server.service('output');
  let stopped: Promise<void> | undefined;
  return {
    mode: opts.mode,
    dir,
    ca,
    actors: server.service('actors'),
    agents: server.agents,
    fanout,
    http: server.service('http'),
    ws,
    grpcTarget: `127.0.0.1:${server.ports.grpc}`,
    async agentTls(instanceId) {
      const issued = await issueAgentCert(ca, { instanceId });
      return { ca: ca.caCertPem, cert: issued.certPem, key: issued.keyPem };
    },
    stop() {
      stopped ??= (async () => {
        await server.stop();
        await rm(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}
