/**
 * The sessions integration tests' server: the real agents server (ActorSystem with the agent
 * actor, AgentService, mTLS gRPC), the sessions component wired exactly as src/main.ts wires it
 * (wireSessions → routes + wsRoutes on the uWS HTTP listener), the events route; real
 * sandbox-agent processes with a private tmux server each (TMUX_TMPDIR), pty-ws.v1 clients over
 * the `ws` package, and polling helpers with generous deadlines.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ActorSystem } from '../../actors/runtime/actor-system.js';
import { AGENT_ACTOR_MODULE, AgentService } from '../../src/agents/agent-service.js';
import { registerAgentRoutes } from '../../src/api/agents.js';
import { registerEventRoutes } from '../../src/api/events.js';
import { loadConfig } from '../../src/config/load.js';
import { SvcError } from '../../src/core/errors.js';
import { EventStore } from '../../src/events/event-store.js';
import { Router } from '../../src/http/router.js';
import { startHttpListener } from '../../src/http/uws-server.js';
import { ensureCa, writeAgentBundle } from '../../src/identity/ca.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { wireSessions, type WiredSessions } from '../../src/sessions/wiring.js';
import { AGENT_BIN, waitFor } from './agents-harness.js';

export { waitFor };

export interface SessionsServer {
  readonly dir: string;
  readonly secretsDir: string;
  readonly trustDomain: string;
  readonly http: number;
  readonly grpc: number;
  readonly base: string;
  readonly wsBase: string;
  readonly sessions: WiredSessions;
  readonly events: EventStore;
  json<T = Record<string, unknown>>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: T }>;
  stop(): Promise<void>;
}

/** Starts the server on `dir` (reuse it to restart); `grpcPort` 0 picks one. */
export async function startSessionsServer(dir: string, grpcPort = 0, graceSeconds = 2): Promise<SessionsServer> {
  const config = loadConfig({
    SVC_STATE_DIR: dir,
    SVC_HTTP_ADDR: '127.0.0.1:0',
    SVC_WS_ADDR: '127.0.0.1:0',
    SVC_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
    SVC_ACTOR_SHARDS: '2',
    SVC_SHUTDOWN_DEADLINE_MS: '5000',
    SVC_AGENT_HEARTBEAT_SECONDS: '2',
    LOG_LEVEL: 'silent',
    SVC_ACTORS: process.env['TEST_SVC_ACTORS'] ?? 'workers',
  });
  const logger = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
  const metrics = createMetrics();
  const events = new EventStore();
  const agents = new AgentService({ config, logger, metrics, events });
  const actors = await ActorSystem.start({
    mode: config.actorsMode,
    shards: config.actorShards,
    actorModules: [AGENT_ACTOR_MODULE],
    ringBytes: config.actorRingBytes,
    logger,
    onEmit: (kind, key, payload) => {
      agents.onEmit(kind, key, payload);
    },
    onShardRestart: (shard, lost) => agents.onShardRestart(shard, lost),
  });
  agents.bindActors(actors);
  let httpPort = 0;
  const sessions = wireSessions({
    agents,
    actors,
    stateDir: config.stateDir,
    // The HTTP port is known only once the listener is bound, after the component is made.
    urls: {
      get httpBaseUrl() {
        return `http://127.0.0.1:${httpPort}`;
      },
      get wsBaseUrl() {
        return `ws://127.0.0.1:${httpPort}`;
      },
    },
    emit: (e) => events.append(e),
    metrics,
    logger,
    graceSeconds,
  });
  const router = new Router();
  registerAgentRoutes(router, { registry: agents.registry, reprovision: () => Promise.reject(new SvcError('server.unavailable', 'this harness runs no VMs')) });
  registerEventRoutes(router, { events });
  sessions.registerRoutes(router);
  const http = await startHttpListener({ host: '127.0.0.1', port: 0, router, logger, maxBodyBytes: config.maxBodyBytes, metrics, wsRoutes: sessions.wsRoutes });
  httpPort = http.port;
  const grpc = await agents.start();
  const base = `http://127.0.0.1:${http.port}`;
  let stopped: Promise<void> | undefined;
  return {
    dir,
    secretsDir: config.secretsDir,
    trustDomain: config.trustDomain,
    http: http.port,
    grpc: grpc.port,
    base,
    wsBase: `ws://127.0.0.1:${http.port}`,
    sessions,
    events,
    async json<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
      const init: RequestInit = { method, headers: { ...headers } };
      if (body !== undefined) {
        init.body = JSON.stringify(body);
        (init.headers as Record<string, string>)['content-type'] = 'application/json';
      }
      const res = await fetch(base + path, init);
      const text = await res.text();
      return { status: res.status, body: (text === '' ? {} : JSON.parse(text)) as T };
    },
    stop() {
      stopped ??= (async () => {
        await http.close();
        await agents.stop();
        await sessions.stop();
        await actors.stop({ deadlineMs: 3000 });
      })();
      return stopped;
    },
  };
}

export interface AgentProc {
  readonly child: ChildProcess;
  readonly tmuxDir: string;
  readonly env: NodeJS.ProcessEnv;
  log(): string;
  readonly exited: Promise<number | null>;
  kill(): Promise<void>;
}

/** A sandbox-agent with its own tmux server (TMUX_TMPDIR in a short temp dir). */
export async function spawnSessionAgent(srv: Pick<SessionsServer, 'dir' | 'grpc' | 'secretsDir' | 'trustDomain'>, agentId: string): Promise<AgentProc> {
  const ca = await ensureCa({ secretsDir: srv.secretsDir, trustDomain: srv.trustDomain });
  const certs = join(srv.dir, `certs-${agentId}`);
  await writeAgentBundle(certs, ca, { instanceId: agentId });
  const tmuxDir = await mkdtemp(join(tmpdir(), 'sx-'));
  const work = await mkdtemp(join(tmpdir(), 'sxw-'));
  const env: NodeJS.ProcessEnv = { ...process.env, TMUX_TMPDIR: tmuxDir, TERM: 'xterm-256color', LANG: 'C.UTF-8' };
  delete env['TMUX'];
  const args = [AGENT_BIN, '--server', `127.0.0.1:${srv.grpc}`, '--certs', certs, '--agent-id', agentId, '--instance-id', agentId, '--work-dir', work, '--log-level', 'debug', '--reconnect-max-ms', '1000'];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
  let log = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => {
    log += d;
    if (log.length > 2_000_000) log = log.slice(-1_000_000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    tmuxDir,
    env,
    log: () => log,
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      // The agent's tmux server outlives it by design; end it with the test.
      await new Promise<void>((r) => spawn('tmux', ['-L', 'sandboxd', 'kill-server'], { env, stdio: 'ignore' }).once('exit', () => r()).once('error', () => r()));
    },
  };
}

interface WsClient {
  on(event: 'open', cb: () => void): this;
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', cb: (code: number, reason: Buffer) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  on(event: 'unexpected-response', cb: (req: unknown, res: { statusCode: number }) => void): this;
  send(data: string | Buffer): void;
  close(): void;
  pause(): void;
  resume(): void;
  terminate(): void;
  readonly protocol: string;
}
type WsCtor = new (url: string, protocols?: string | string[]) => WsClient;
const WebSocketClient = createRequire(import.meta.url)('ws') as WsCtor;

export type Frame = Record<string, unknown> & { op: string };

/** A pty-ws.v1 client: every frame kept, output decoded into `text()`. */
export class PtyClient {
  readonly ws: WsClient;
  readonly frames: Frame[] = [];
  readonly closed: Promise<number>;
  #output = '';

  private constructor(ws: WsClient) {
    this.ws = ws;
    ws.on('message', (d, isBinary) => {
      if (isBinary) return;
      const f = JSON.parse(d.toString('utf8')) as Frame;
      this.frames.push(f);
      if (f.op === 'pty.output') this.#output += Buffer.from(String(f['data']), 'base64').toString('utf8');
    });
    this.closed = new Promise((r) => ws.on('close', (code) => r(code)));
  }

  static async open(wsBase: string, sessionId: string): Promise<PtyClient> {
    const ws = new WebSocketClient(`${wsBase}/api/v1/sessions/${encodeURIComponent(sessionId)}/pty`, ['pty-ws.v1']);
    const c = new PtyClient(ws);
    await new Promise<void>((resolve, reject) => ws.on('open', resolve).on('error', reject));
    return c;
  }

  /** Status of a refused upgrade. */
  static refusedStatus(url: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocketClient(url, ['pty-ws.v1']);
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode));
      ws.on('open', () => reject(new Error('upgrade was accepted')));
      ws.on('error', () => undefined);
    });
  }

  send(frame: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(frame));
  }

  async join(role: 'controller' | 'observer'): Promise<Frame> {
    this.send({ op: 'pty.join_session', role, session_backend: 'tmux', session_class: 'managed' });
    return await this.next('pty.role_assigned');
  }

  type(text: string): void {
    this.send({ op: 'pty.session_input', data: Buffer.from(text).toString('base64') });
  }

  text(): string {
    return this.#output;
  }

  /** Waits for the first not-yet-seen frame with `op` (from `after` on). */
  async next(op: string, timeoutMs = 20_000): Promise<Frame> {
    return await waitFor(`frame ${op}`, () => this.frames.find((f) => f.op === op), timeoutMs, 20);
  }

  async waitText(re: RegExp, timeoutMs = 30_000): Promise<string> {
    return await waitFor(`output matching ${String(re)} (have ${JSON.stringify(this.#output.slice(-300))})`, () => (re.test(this.#output) ? this.#output : undefined), timeoutMs, 50);
  }

  close(): void {
    this.ws.close();
  }
}

/** v1 events of an agent, oldest first. */
export async function eventsOf(srv: SessionsServer, agentId: string): Promise<{ event_type: string; details: Record<string, unknown> }[]> {
  const { body } = await srv.json<{ events: { event_type: string; details: Record<string, unknown> }[] }>('GET', `/api/v1/events?agent_id=${encodeURIComponent(agentId)}&limit=5000`);
  return body.events;
}

/** Runs tmux on an agent's private server. */
export function tmuxOn(agent: AgentProc, args: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const c = spawn('tmux', ['-L', 'sandboxd', ...args], { env: agent.env, stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    c.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    c.once('exit', (code) => resolve({ code, stdout: out }));
  });
}

/** True while process `pid` exists and is not a zombie. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
