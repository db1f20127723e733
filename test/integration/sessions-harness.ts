/**
 * The sessions integration tests' server: startServer with the events, actors, agents, output (the
 * WebSocket listener the create record's ws_endpoint names), sessions, HTTP and gRPC listener
 * components (what src/main.ts starts, without VMs and tasks); real
 * sandbox-agent processes with a private tmux server each (TMUX_TMPDIR) and a HOME of their own
 * (an empty one: no dotfiles, so a shell starts the same on every machine), raw pty-ws.v1 binding
 * clients over the `ws` package whose waits name what they waited for and show the frames received.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import pino from 'pino';
import { authComponent } from '../../src/auth/component.js';
import { idempotencyComponent } from '../../src/idempotency/component.js';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { loadConfig } from '../../src/config/load.js';
import { eventsComponent } from '../../src/events/component.js';
import { ensureCa, writeAgentBundle } from '../../src/identity/ca.js';
import type { EventStore } from '../../src/events/event-store.js';
import type { Component } from '../../src/component/component.js';
import { startServer } from '../../src/main.js';
import { actorsComponent, httpComponent } from '../../src/server/runtime-components.js';
import { sessionsComponent, type WiredSessions } from '../../src/sessions/component.js';
import { decodeBinaryOutput, encodeBinaryInput } from '../../src/sessions/binding/binary.js';
import { clientFrame, toText } from '../../src/sessions/binding/encode.js';
import type { ClientFrame, JoinSessionFrame, SessionInputFrame } from '../../src/sessions/binding/frames.js';
import { outputComponent } from '../../src/streaming/component.js';
import { DEADLINE_MS, tail, waitFor } from '../support/wait.js';
import { AGENT_BIN } from './agents-harness.js';

export interface SessionsServer {
  readonly dir: string;
  readonly secretsDir: string;
  readonly trustDomain: string;
  readonly http: number;
  /** The WebSocket listener's port (SVC_WS_ADDR). */
  readonly ws: number;
  readonly grpc: number;
  readonly base: string;
  readonly wsBase: string;
  readonly sessions: WiredSessions;
  readonly events: EventStore;
  json<T = Record<string, unknown>>(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: T }>;
  stop(): Promise<void>;
}

/**
 * Starts the server on `dir` (reuse it to restart); `grpcPort` 0 picks one. `extra` adds
 * environment variables and components (listed last) to the bed.
 */
export async function startSessionsServer(
  dir: string,
  grpcPort = 0,
  graceSeconds = 2,
  extra: { readonly env?: Record<string, string>; readonly components?: readonly Component[] } = {},
): Promise<SessionsServer> {
  const config = loadConfig({
    SVC_STATE_DIR: dir,
    SVC_HTTP_ADDR: '127.0.0.1:0',
    SVC_WS_ADDR: '127.0.0.1:0',
    SVC_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
    SVC_ADMIN_ADDR: '127.0.0.1:0',
    SVC_ACTOR_SHARDS: '2',
    SVC_SHUTDOWN_DEADLINE_MS: '5000',
    SVC_AGENT_HEARTBEAT_SECONDS: '2',
    LOG_LEVEL: 'silent',
    SVC_ACTORS: process.env['TEST_SVC_ACTORS'] ?? 'workers',
    ...extra.env,
  });
  const logger = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
  const server = await startServer(config, logger, {
    components: [
      authComponent,
      idempotencyComponent,
      eventsComponent(),
      actorsComponent,
      agentsComponent,
      outputComponent(),
      sessionsComponent({ graceSeconds }),
      httpComponent,
      agentListenerComponent,
      ...(extra.components ?? []),
    ],
  });
  const http = { port: server.ports.http };
  const grpc = { port: server.ports.grpc };
  const base = `http://127.0.0.1:${http.port}`;
  let stopped: Promise<void> | undefined;
  return {
    dir,
    secretsDir: config.secretsDir,
    trustDomain: config.trustDomain,
    http: http.port,
    ws: server.ports.ws,
    grpc: grpc.port,
    base,
    wsBase: `ws://127.0.0.1:${http.port}`,
    sessions: server.service('sessions'),
    events: server.events,
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
      stopped ??= server.stop();
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
export async function spawnSessionAgent(
  srv: Pick<SessionsServer, 'dir' | 'grpc' | 'secretsDir' | 'trustDomain'>,
  agentId: string,
): Promise<AgentProc> {
  const ca = await ensureCa({ secretsDir: srv.secretsDir, trustDomain: srv.trustDomain });
  const certs = join(srv.dir, `certs-${agentId}`);
  await writeAgentBundle(certs, ca, { instanceId: agentId });
  const tmuxDir = await mkdtemp(join(tmpdir(), 'sx-'));
  const work = await mkdtemp(join(tmpdir(), 'sxw-'));
  // HOME is the (empty) work dir: the sessions' bash reads no ~/.bashrc of whoever runs the tests.
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: work, TMUX_TMPDIR: tmuxDir, TERM: 'xterm-256color', LANG: 'C.UTF-8' };
  for (const k of ['TMUX', 'BASH_ENV', 'ENV']) delete env[k];
  const args = [
    AGENT_BIN,
    '--server',
    `127.0.0.1:${srv.grpc}`,
    '--certs',
    certs,
    '--agent-id',
    agentId,
    '--instance-id',
    agentId,
    '--work-dir',
    work,
    '--log-level',
    'debug',
    '--reconnect-max-ms',
    '1000',
  ];
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
      await new Promise<void>((r) =>
        spawn('tmux', ['-L', 'sandboxd', 'kill-server'], { env, stdio: 'ignore' })
          .once('exit', () => r())
          .once('error', () => r()),
      );
    },
  };
}

interface WsClient {
  on(event: 'open', cb: () => void): this;
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', cb: (code: number, reason: Buffer) => void): this;
  on(event: 'error', cb: (err: Error) => void): this;
  on(event: 'unexpected-response', cb: (req: unknown, res: { statusCode: number }) => void): this;
  send(data: string | Uint8Array): void;
  close(): void;
  pause(): void;
  resume(): void;
  terminate(): void;
  readonly protocol: string;
}
type WsCtor = new (url: string, protocols?: string | string[]) => WsClient;
const WebSocketClient = createRequire(import.meta.url)('ws') as WsCtor;

/** A frame as received: the JSON of a text frame, or `{op: 'PW1O', sequence}` for a binary output message. */
export type Frame = Record<string, unknown> & { op: string };
/** A pty.session_frame's payload. */
export type SessionPayload = Record<string, unknown> & { kind: string };

/** What a probe command prints once a shell runs it (the typed line itself does not contain it). */
const SHELL_PROBE = { input: 'echo "shell-$((40+2))"\r', output: /shell-42/ } as const;

/**
 * A raw pty-ws.v1 binding client (frames built with src/sessions/binding's encoders): every frame
 * kept, output (Output frames and PW1O messages) decoded into `text()`. Raw on purpose: tests
 * send malformed frames and stall its socket. sandboxd's own client is src/client/pty-ws.ts.
 */
export class PtyClient {
  readonly ws: WsClient;
  readonly frames: Frame[] = [];
  #output = '';
  /** Frames already returned by next()/nextKind(): each is handed out once. */
  readonly #taken = new Set<Frame>();
  readonly #listeners = new Set<() => void>();
  #closeCode: number | undefined;

  private constructor(ws: WsClient) {
    this.ws = ws;
    ws.on('message', (d, isBinary) => {
      if (isBinary) {
        const r = decodeBinaryOutput(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
        if (!r.ok) throw new Error(`a binary message that is not PW1O: ${r.message}`);
        this.frames.push({ op: 'PW1O', sequence: r.value.sequence });
        this.#output += Buffer.from(r.value.bytes).toString('utf8');
      } else {
        const f = JSON.parse(d.toString('utf8')) as Frame;
        this.frames.push(f);
        const p = f['payload'] as SessionPayload | undefined;
        if (f.op === 'pty.session_frame' && p?.kind === 'Output') this.#output += Buffer.from(String(p['data']), 'base64').toString('utf8');
      }
      for (const l of this.#listeners) l();
    });
    ws.on('close', (code) => {
      this.#closeCode = code;
      for (const l of this.#listeners) l();
    });
  }

  /** Opens the session's pty-ws.v1 socket offering `protocols` (default JSON only). */
  static async open(wsBase: string, sessionId: string, protocols: string[] = ['pty-ws.v1']): Promise<PtyClient> {
    const ws = new WebSocketClient(`${wsBase}/api/v1/sessions/${encodeURIComponent(sessionId)}/pty`, protocols);
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

  /** Sends a client frame of the binding (fresh id, now). */
  send<F extends ClientFrame>(op: F['op'], payload: F['payload'], extra?: { replay_from?: number }): void {
    this.ws.send(toText(clientFrame<F>(op, payload, extra)));
  }

  /** Joins and waits for the RoleAssigned answer; resolves with its payload (role, client_id, downgraded?, reason?). */
  async join(role: 'controller' | 'observer', replayFrom?: number): Promise<SessionPayload> {
    this.send<JoinSessionFrame>('pty.join_session', { role }, replayFrom === undefined ? {} : { replay_from: replayFrom });
    return await this.nextKind('RoleAssigned');
  }

  /** Types `text`: PW1I on pty-ws.v1.binary, pty.session_input otherwise. */
  type(text: string): void {
    if (this.ws.protocol === 'pty-ws.v1.binary') this.ws.send(encodeBinaryInput(Buffer.from(text)));
    else this.send<SessionInputFrame>('pty.session_input', { data: Buffer.from(text).toString('base64') });
  }

  text(): string {
    return this.#output;
  }

  /** What this client received, for a timeout message: the last frames, the close code, the output's tail. */
  describe(): string {
    const ops = this.frames.slice(-12).map((f) => {
      const p = f['payload'] as Record<string, unknown> | undefined;
      return f.op === 'pty.session_frame' ? String(p?.['kind']) : f.op === 'Error' ? `Error:${String(p?.['code'])}` : f.op;
    });
    return `frames ${JSON.stringify(ops)} (of ${this.frames.length})${this.#closeCode !== undefined ? `, closed ${this.#closeCode}` : ''}, output ${tail(this.#output)}`;
  }

  /** Waits for the first frame with `op` that no earlier next() returned. */
  async next(op: string, deadlineMs: number = DEADLINE_MS.process): Promise<Frame> {
    const frame = await this.#until(`frame ${op}`, () => this.frames.find((f) => f.op === op && !this.#taken.has(f)), deadlineMs);
    this.#taken.add(frame);
    return frame;
  }

  /** Waits for the first pty.session_frame of `kind` not yet handed out; resolves with its payload. */
  async nextKind(kind: string, deadlineMs: number = DEADLINE_MS.process): Promise<SessionPayload> {
    const frame = await this.#until(
      `a ${kind} session frame`,
      () =>
        this.frames.find(
          (f) => f.op === 'pty.session_frame' && (f['payload'] as SessionPayload | undefined)?.kind === kind && !this.#taken.has(f),
        ),
      deadlineMs,
    );
    this.#taken.add(frame);
    return frame['payload'] as SessionPayload;
  }

  /** Waits until the output matches `re`; resolves with the whole output. */
  async waitText(re: RegExp, deadlineMs: number = DEADLINE_MS.process): Promise<string> {
    return await this.#until(`output matching ${String(re)}`, () => (re.test(this.#output) ? this.#output : undefined), deadlineMs);
  }

  /**
   * Types `input` (again every `everyMs`) until the output matches `re`: for answers that depend
   * on something asynchronous, such as a resize travelling PTY → tmux client → tmux server.
   */
  async askUntil(input: string, re: RegExp, what: string, everyMs = 1000, deadlineMs: number = DEADLINE_MS.process): Promise<string> {
    let askedMs = 0;
    return await this.#until(
      what,
      () => {
        if (re.test(this.#output)) return this.#output;
        if (Date.now() - askedMs >= everyMs) {
          askedMs = Date.now();
          this.type(input);
        }
        return undefined;
      },
      deadlineMs,
    );
  }

  /**
   * As controller: waits until the session's shell runs commands (a probe typed until its answer
   * shows), with no assumption about the prompt. A slow shell start-up (a busy machine, a
   * system bashrc) or one that swallows early input then cannot eat the test's first command.
   */
  async waitForShell(deadlineMs: number = DEADLINE_MS.process): Promise<void> {
    await this.askUntil(SHELL_PROBE.input, SHELL_PROBE.output, "the session's shell to run a command", 2000, deadlineMs);
  }

  /** Waits for the socket to close; resolves with the close code. */
  async waitClosed(deadlineMs: number = DEADLINE_MS.process): Promise<number> {
    return await this.#until('the socket to close', () => this.#closeCode, deadlineMs);
  }

  close(): void {
    this.ws.close();
  }

  #until<T>(what: string, check: () => T | undefined, deadlineMs: number): Promise<T> {
    return waitFor(what, check, {
      deadlineMs,
      wake: (recheck) => (this.#listeners.add(recheck), () => this.#listeners.delete(recheck)),
      lastState: () => this.describe(),
    });
  }
}

/**
 * Waits until `agentId` is listed and not Disconnected (its stream is up); the timeout shows the
 * agents the server lists and the tail of the agent's own log.
 */
export async function waitForAgent(
  srv: Pick<SessionsServer, 'json'>,
  agent: AgentProc,
  agentId: string,
  deadlineMs: number = DEADLINE_MS.agent,
): Promise<void> {
  const listed = async (): Promise<{ id: string; status: string }[]> =>
    (await srv.json<{ agents: { id: string; status: string }[] }>('GET', '/api/v1/agents')).body.agents;
  await waitFor(
    `agent ${agentId} to be connected`,
    async () => (await listed()).some((a) => a.id === agentId && a.status !== 'Disconnected'),
    {
      deadlineMs,
      intervalMs: 100,
      lastState: async () => `agents ${JSON.stringify(await listed())}; agent log ${tail(agent.log(), 1500)}`,
    },
  );
}

/** v1 events of an agent, oldest first. */
export async function eventsOf(srv: SessionsServer, agentId: string): Promise<{ event_type: string; details: Record<string, unknown> }[]> {
  const { body } = await srv.json<{ events: { event_type: string; details: Record<string, unknown> }[] }>(
    'GET',
    `/api/v1/events?agent_id=${encodeURIComponent(agentId)}&limit=5000`,
  );
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

/** A test file's server and agent: started before its tests, stopped after them (`beforeStop` first). */
export interface SessionsBed {
  readonly srv: SessionsServer;
  readonly agent: AgentProc;
}

export function useSessionsBed(agentId: string, beforeStop?: () => void): SessionsBed {
  let dir = '';
  let srv: SessionsServer | undefined;
  let agent: AgentProc | undefined;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), `sandboxd-${agentId}-`));
    srv = await startSessionsServer(dir);
    agent = await spawnSessionAgent(srv, agentId);
    await waitForAgent(srv, agent, agentId);
  });
  after(async () => {
    beforeStop?.();
    await srv?.stop();
    await agent?.kill();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });
  const started = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('the sessions bed is not started');
    return v;
  };
  return {
    get srv() {
      return started(srv);
    },
    get agent() {
      return started(agent);
    },
  };
}
