/**
 * Set-up of the streaming integration tests: startServer with the events, actors, agents, output
 * (fanout and WS listener), server routes, HTTP and gRPC listener components, ports 0, a
 * temporary state dir, and helpers to run commands on real sandbox-agent processes.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { agentActorId } from '../../actors/protocol/agent-frames.js';
import type { ReplaySettings } from '../../actors/protocol/output-calls.js';
import type { ActorSystem } from '../../actors/runtime/actor-system.js';
import type { AgentService } from '../../src/agent-link/agent-service.js';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { loopbackConfig } from '../support/test-config.js';
import type { Config } from '../../src/config/schema.js';
import { eventsComponent } from '../../src/events/component.js';
import type { HttpListener } from '../../src/http/uws-server.js';
import type { WsListener } from '../../src/http/ws-server.js';
import { ensureCa, writeAgentBundle, type CaMaterial } from '../../src/identity/ca.js';
import { startServer } from '../../src/main.js';
import type { Metrics } from '../../src/observability/metrics.js';
import { actorsComponent, httpComponent } from '../../src/server/runtime-components.js';
import { serverRoutesComponent } from '../../src/server/server-routes.js';
import { outputComponent } from '../../src/streaming/component.js';
import type { OutputFanout } from '../../src/streaming/output-fanout.js';
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
  const config = loopbackConfig(dir, {
    SVC_ACTOR_SHARDS: '2',
    SVC_AGENT_HEARTBEAT_SECONDS: '1',
    SVC_ACTORS: process.env['TEST_SVC_ACTORS'] ?? 'workers',
    ...opts.env,
  });
  const logger = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
  const output = outputComponent({
    ...(opts.replay !== undefined && { replay: opts.replay }),
    ...(opts.sseQueueBytes !== undefined && { sseQueueBytes: opts.sseQueueBytes }),
    ...(opts.wsSlowCloseBytes !== undefined && { wsSlowCloseBytes: opts.wsSlowCloseBytes }),
  });
  const server = await startServer(config, logger, {
    components: [eventsComponent(), actorsComponent, agentsComponent, output, serverRoutesComponent, httpComponent, agentListenerComponent],
  });
  const actors = server.service('actors');
  const agents = server.agents;
  const { fanout: f, ws } = server.service('output');
  const http = server.service('http');
  const results = new Map<string, number>();
  agents.subscribeCommands((e) => {
    if (e.kind === 'result') results.set(e.command_id, e.exit_code);
  });
  const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
  const grpcTarget = `127.0.0.1:${server.ports.grpc}`;
  const procs: AgentProcess[] = [];
  const base = `http://127.0.0.1:${http.port}`;
  let stopped: Promise<void> | undefined;
  return {
    config,
    dir,
    ca,
    actors,
    agents,
    fanout: f,
    metrics: server.metrics,
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
        await server.stop();
        await rm(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}
