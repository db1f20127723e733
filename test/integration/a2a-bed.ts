/**
 * The A2A tests' bed: a real sandboxd (events, actors, agents, the a2a component, sessions, HTTP
 * and gRPC listeners, on 127.0.0.1) with a real sandbox-agent, and an A2A client written from the
 * A2A specification and the published pty-ws/v1 binding: plain JSON objects over the `ws` package
 * and fetch/node:http, nothing imported from sandboxd's A2A code.
 */
import { request } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { after, before } from 'node:test';
import pino from 'pino';
import { a2aComponent } from '../../src/a2a/component.js';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { authComponent } from '../../src/auth/component.js';
import { loadConfig } from '../../src/config/load.js';
import { eventsComponent } from '../../src/events/component.js';
import { idempotencyComponent } from '../../src/idempotency/component.js';
import { startServer } from '../../src/main.js';
import { actorsComponent, httpComponent } from '../../src/server/runtime-components.js';
import { sessionsComponent } from '../../src/sessions/component.js';
import { outputComponent } from '../../src/streaming/component.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { validateServer } from '../unit/sessions/binding/schema-kit.js';
import { spawnSessionAgent, waitForAgent, type AgentProc, type SessionsServer } from './sessions-harness.js';

export interface A2aServer {
  readonly base: string;
  json<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  readonly wsBase: string;
  readonly port: number;
  stop(): Promise<void>;
}

async function startA2aServer(
  dir: string,
): Promise<A2aServer & Pick<SessionsServer, 'dir' | 'grpc' | 'secretsDir' | 'trustDomain' | 'json'>> {
  const config = loadConfig({
    SVC_STATE_DIR: dir,
    SVC_HTTP_ADDR: '127.0.0.1:0',
    SVC_WS_ADDR: '127.0.0.1:0',
    SVC_GRPC_ADDR: '127.0.0.1:0',
    SVC_ADMIN_ADDR: '127.0.0.1:0',
    SVC_ACTOR_SHARDS: '2',
    SVC_SHUTDOWN_DEADLINE_MS: '5000',
    SVC_AGENT_HEARTBEAT_SECONDS: '2',
    LOG_LEVEL: 'silent',
    SVC_ACTORS: process.env['TEST_SVC_ACTORS'] ?? 'workers',
  });
  const server = await startServer(config, pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' }), {
    components: [
      authComponent,
      idempotencyComponent,
      eventsComponent(),
      actorsComponent,
      agentsComponent,
      outputComponent(),
      a2aComponent({ killGraceMs: 2000 }),
      sessionsComponent({ graceSeconds: 2 }),
      httpComponent,
      agentListenerComponent,
    ],
  });
  const base = `http://127.0.0.1:${server.ports.http}`;
  return {
    dir,
    grpc: server.ports.grpc,
    secretsDir: config.secretsDir,
    trustDomain: config.trustDomain,
    base,
    wsBase: `ws://127.0.0.1:${server.ports.http}`,
    port: server.ports.http,
    async json<T>(method: string, path: string, body?: unknown) {
      const init: RequestInit = { method };
      if (body !== undefined) init.body = JSON.stringify(body);
      if (body !== undefined) init.headers = { 'content-type': 'application/json' };
      const res = await fetch(base + path, init);
      return { status: res.status, body: (await res.json()) as T };
    },
    stop: () => server.stop(),
  };
}

export interface A2aBed {
  readonly srv: A2aServer;
  readonly agent: AgentProc;
  readonly instanceId: string;
  /** Stops the server and starts a new one on the same state directory (the agent is not reconnected). */
  restart(): Promise<void>;
}

export function useA2aBed(instanceId: string): A2aBed {
  let dir = '';
  let srv: Awaited<ReturnType<typeof startA2aServer>> | undefined;
  let agent: AgentProc | undefined;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), `sandboxd-${instanceId}-`));
    srv = await startA2aServer(dir);
    agent = await spawnSessionAgent(srv, instanceId);
    await waitForAgent(srv, agent, instanceId);
  });
  after(async () => {
    await srv?.stop();
    await agent?.kill();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });
  return {
    get srv() {
      if (srv === undefined) throw new Error('bed not started');
      return srv;
    },
    get agent() {
      if (agent === undefined) throw new Error('bed not started');
      return agent;
    },
    instanceId,
    async restart() {
      await srv?.stop();
      srv = await startA2aServer(dir);
    },
  };
}

/** A GET with the path sent exactly as written (no URL normalisation of dot segments). */
export function rawGet(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

interface WsLike {
  on(event: 'open', cb: () => void): this;
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', cb: (code: number) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  send(data: string): void;
  close(): void;
  terminate(): void;
}
const WebSocket = createRequire(import.meta.url)('ws') as new (url: string, protocols: string[]) => WsLike;

/** Frames are read loosely: the tests assert on every field they read. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON from the wire, checked by the assertions
export type Loose = Record<string, any>;
export type Frame = { op: string; id: string; ts: string; sequence?: number; payload: Loose };

/**
 * An A2A client of the pty-ws/v1 binding: opens `/agents/{instance_id}/sessions/{uuid}/attach`
 * with subprotocol pty-ws.v1, reads binding_hello, sends the binding's request frames (envelope
 * op, id, ts, payload) and waits for the frames the binding spec names.
 */
export class A2aWsClient {
  readonly frames: Frame[] = [];
  readonly #ws: WsLike;
  readonly #wake = new Set<() => void>();

  private constructor(ws: WsLike) {
    this.#ws = ws;
    ws.on('message', (d) => {
      this.frames.push(JSON.parse(d.toString('utf8')) as Frame);
      for (const w of this.#wake) w();
    });
  }

  static async open(wsBase: string, instanceId: string): Promise<A2aWsClient> {
    return await A2aWsClient.openUrl(`${wsBase}/agents/${encodeURIComponent(instanceId)}/sessions/${randomUUID()}/attach`);
  }

  /** Opens any pty-ws.v1 URL (a session's `/api/v1/sessions/{id}/pty`, say). */
  static async openUrl(url: string): Promise<A2aWsClient> {
    const ws = new WebSocket(url, ['pty-ws.v1']);
    const c = new A2aWsClient(ws);
    await new Promise<void>((resolve, reject) => ws.on('open', resolve).on('error', reject));
    await c.waitFor('binding_hello', (f) => f.op === 'binding_hello');
    return c;
  }

  get hello(): Frame {
    const f = this.frames[0];
    if (f?.op !== 'binding_hello') throw new Error('no binding_hello first');
    return f;
  }

  /** Sends a request frame; returns its id. */
  send(op: string, payload: Record<string, unknown>, extra: Record<string, unknown> = {}): string {
    const id = randomUUID();
    this.#ws.send(JSON.stringify({ op, id, ts: new Date().toISOString(), payload, ...extra }));
    return id;
  }

  /** Sends and waits for the answer with the same id (`<op>.Response`, `.Accepted` or `Error`). */
  async call(op: string, payload: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<Frame> {
    const id = this.send(op, payload, extra);
    return await this.waitFor(`the answer to ${op}`, (f) => f.id === id);
  }

  async waitFor(what: string, match: (f: Frame) => boolean, from = 0): Promise<Frame> {
    return await waitFor(what, () => this.frames.slice(from).find(match), {
      deadlineMs: DEADLINE_MS.process,
      wake: (w) => (this.#wake.add(w), () => this.#wake.delete(w)),
      lastState: () =>
        JSON.stringify(this.frames.slice(-6).map((f): unknown[] => [f.op, f.payload?.['task']?.status?.state ?? f.payload?.['code']])),
    });
  }

  /** TaskStatusUpdate frames of a task, in arrival order. */
  updates(taskId: string): Frame[] {
    return this.frames.filter((f) => f.op === 'TaskStatusUpdate' && f.payload['task']?.id === taskId);
  }

  /** Received frames that the binding's JSON Schema (ServerFrame) refuses, with Ajv's first error. */
  invalidFrames(): string[] {
    const valid = (f: unknown): boolean => validateServer(f);
    return this.frames.filter((f) => !valid(f)).map((f) => `${f.op}: ${JSON.stringify(validateServer.errors?.[0] ?? {})}`);
  }

  close(): void {
    this.#ws.terminate();
  }
}

/** An A2A Message (1.0 ProtoJSON: member-discriminated parts) with one text part. */
export function textMessage(text: string): Record<string, unknown> {
  return { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] };
}

/** Waits until GetTask shows a terminal state; resolves with the task. */
export async function untilTerminal(c: A2aWsClient, taskId: string): Promise<Loose> {
  return await waitFor(
    `task ${taskId} to end`,
    async () => {
      const r = await c.call('GetTask', { task_id: taskId });
      const state = r.payload['task']?.status?.state as string | undefined;
      return state !== undefined && /COMPLETED|FAILED|CANCELED|REJECTED/.test(state) ? (r.payload['task'] as Loose) : undefined;
    },
    { deadlineMs: DEADLINE_MS.process, intervalMs: 100 },
  );
}
