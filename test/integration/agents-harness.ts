/**
 * Shared set-up of the agents integration tests: the whole server in-process (startServer, ports
 * 0, a temporary state dir), certificates from its CA, real sandbox-agent processes, an operator
 * gRPC client for Exec, and polling helpers with generous deadlines (2-core CI machines).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { AgentServiceMethods, v1 } from '../../proto/index.js';
import { loopbackConfig } from '../support/test-config.js';
import type { Config } from '../../src/config/schema.js';
import { ensureCa, issueOperatorCert, writeAgentBundle, type CaMaterial, type IssuedCert } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { DEADLINE_MS, waitFor as waitForCondition } from '../support/wait.js';

/** The compiled agent binary next to this compiled test (dist/ or a private build folder). */
export const AGENT_BIN = fileURLToPath(new URL('../../src/bin/sandbox-agent.js', import.meta.url));

export interface TestServer {
  readonly server: ServerHandle;
  readonly config: Config;
  readonly dir: string;
  readonly ca: CaMaterial;
  readonly grpcTarget: string;
  getJson<T = unknown>(path: string): Promise<{ status: number; body: T }>;
  postJson<T = unknown>(path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** Stops the server and removes the state dir (idempotent). */
  stop(): Promise<void>;
}

export interface AgentEvent {
  id: number;
  event_type: string;
  agent_id: string;
  details: Record<string, unknown>;
}

/**
 * Starts sandboxd with a fresh state dir; `env` overrides (SVC_AGENT_HEARTBEAT_SECONDS, …).
 * `logLines`, when given, receives every log line at `logLevel` (default warn) and above (JSON text).
 */
export async function startTestServer(
  env: Record<string, string> = {},
  reuseDir?: string,
  logLines?: string[],
  logLevel = 'warn',
): Promise<TestServer> {
  const dir = reuseDir ?? (await mkdtemp(join(tmpdir(), 'sandboxd-agents-')));
  const config = loopbackConfig(dir, {
    SVC_ACTOR_SHARDS: '2',
    SVC_SHUTDOWN_DEADLINE_MS: '5000',
    // TEST_SVC_ACTORS=inline runs the same tests with the actors on the main thread.
    SVC_ACTORS: process.env['TEST_SVC_ACTORS'] ?? 'workers',
    ...env,
  });
  const logger =
    logLines === undefined
      ? pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' })
      : pino({ level: logLevel }, { write: (line: string) => void logLines.push(line) });
  const server = await startServer(config, logger);
  const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
  const base = `http://127.0.0.1:${server.ports.http}`;
  let stopped: Promise<void> | undefined;
  return {
    server,
    config,
    dir,
    ca,
    grpcTarget: `127.0.0.1:${server.ports.grpc}`,
    async getJson<T>(path: string) {
      const res = await fetch(base + path);
      return { status: res.status, body: (await res.json()) as T };
    },
    async postJson<T>(path: string, body?: unknown) {
      const init: RequestInit = { method: 'POST' };
      if (body !== undefined) {
        init.body = JSON.stringify(body);
        init.headers = { 'content-type': 'application/json' };
      }
      const res = await fetch(base + path, init);
      return { status: res.status, body: (await res.json()) as T };
    },
    stop() {
      stopped ??= (async () => {
        await server.stop();
        if (reuseDir === undefined) await rm(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

/**
 * Polls `check` until it returns a value other than undefined/false: the shared helper
 * (test/support/wait.ts) with this file's positional defaults; `lastState` is what a timeout shows.
 */
export function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs: number = DEADLINE_MS.process,
  intervalMs = 100,
  lastState?: () => string | Promise<string>,
): Promise<T> {
  return waitForCondition(what, check, { deadlineMs: timeoutMs, intervalMs, ...(lastState !== undefined && { lastState }) });
}

export interface ListedAgent {
  id: string;
  status: string;
  connected_at: number;
  last_heartbeat: number;
  [k: string]: unknown;
}

/** The listed agent `id`, or undefined. */
export async function agentOf(ts: TestServer, id: string): Promise<ListedAgent | undefined> {
  const { body } = await ts.getJson<{ agents: ListedAgent[] }>('/api/v1/agents');
  return body.agents.find((a) => a.id === id);
}

/** Waits until agent `id` is listed with `status`; the timeout shows the agent as last listed. */
export function waitForStatus(ts: TestServer, id: string, status: string, timeoutMs: number = DEADLINE_MS.process): Promise<ListedAgent> {
  let seen: ListedAgent | undefined;
  return waitFor(
    `agent ${id} to be ${status}`,
    async () => {
      seen = await agentOf(ts, id);
      return seen?.status === status ? seen : undefined;
    },
    timeoutMs,
    100,
    () =>
      `agent ${seen === undefined ? 'not listed' : JSON.stringify({ status: seen.status, connected_at: seen.connected_at, last_heartbeat: seen.last_heartbeat })}`,
  );
}

export async function eventsOf(ts: TestServer, agentId: string): Promise<AgentEvent[]> {
  const { body } = await ts.getJson<{ events: AgentEvent[] }>(`/api/v1/events?agent_id=${encodeURIComponent(agentId)}&limit=5000`);
  return body.events;
}

/** Writes ca.pem, agent.pem, agent-key.pem for `instanceId` under the server's state dir. */
export async function agentCerts(ts: TestServer, instanceId: string, opts: { ttlSeconds?: number; now?: Date } = {}): Promise<string> {
  const dir = join(ts.dir, 'agent-certs', `${instanceId}-${Math.random().toString(36).slice(2, 8)}`);
  await writeAgentBundle(dir, ts.ca, { instanceId, ...opts });
  return dir;
}

/** A running sandbox-agent process. */
export interface AgentProcess {
  readonly child: ChildProcess;
  /** Everything it wrote to stderr (JSON log lines). */
  log(): string;
  /** Resolves when it has exited. */
  readonly exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): void;
}

export function spawnAgent(opts: {
  server: string;
  certs: string;
  agentId: string;
  instanceId: string;
  workDir?: string;
  extraArgs?: string[];
  /** Node options before the agent's script (a guest image's, say). */
  nodeOptions?: readonly string[];
  /** Environment changes: a string sets the variable, undefined removes it. */
  env?: Readonly<Record<string, string | undefined>>;
}): AgentProcess {
  const args = [
    AGENT_BIN,
    '--server',
    opts.server,
    '--certs',
    opts.certs,
    '--agent-id',
    opts.agentId,
    '--instance-id',
    opts.instanceId,
    '--log-level',
    'debug',
    '--reconnect-max-ms',
    '1000',
  ];
  if (opts.workDir !== undefined) args.push('--work-dir', opts.workDir);
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(opts.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  const child = spawn(process.execPath, [...(opts.nodeOptions ?? []), ...args, ...(opts.extraArgs ?? [])], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env,
  });
  let log = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => {
    log += d;
    if (log.length > 4_000_000) log = log.slice(-2_000_000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    log: () => log,
    exited,
    kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}

/** A live process as /proc lists it. */
interface ProcEntry {
  pid: number;
  ppid: number;
  pgrp: number;
  state: string;
}

/** Every process in /proc (Linux; empty elsewhere). */
function processTable(): ProcEntry[] {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return [];
  }
  const out: ProcEntry[] = [];
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      // "pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(pid), state: f[0] ?? '', ppid: Number(f[1]), pgrp: Number(f[2]) });
    } catch {
      // it exited meanwhile
    }
  }
  return out;
}

/**
 * The commands `agent` runs now: its child processes, with their command lines. Each leads its
 * own process group (command-runner.ts spawns them detached, so the agent can end a command with
 * all its descendants), which also means they outlive an agent killed with SIGKILL: a test that
 * kills an agent under a running command must end that command's group itself.
 */
export function agentCommands(agent: AgentProcess): { pid: number; cmdline: string }[] {
  const agentPid = agent.child.pid;
  if (agentPid === undefined || agent.child.exitCode !== null || agent.child.signalCode !== null) return [];
  return processTable()
    .filter((p) => p.ppid === agentPid && p.state !== 'Z')
    .flatMap((p) => {
      try {
        return [{ pid: p.pid, cmdline: readFileSync(`/proc/${p.pid}/cmdline`, 'latin1').split('\0').join(' ').trim() }];
      } catch {
        return [];
      }
    });
}

/** SIGKILLs the process groups `pgids` and resolves once none has a live (non-zombie) member. */
export async function killProcessGroups(pgids: readonly number[]): Promise<void> {
  const groups = new Set(pgids.filter((g) => g > 1));
  if (groups.size === 0) return;
  for (const g of groups) {
    try {
      process.kill(-g, 'SIGKILL');
    } catch {
      // the group is gone already
    }
  }
  await waitFor(
    `process groups ${[...groups].join(', ')} to be gone`,
    () => !processTable().some((p) => groups.has(p.pgrp) && p.state !== 'Z'),
    DEADLINE_MS.process,
    20,
  );
}

/**
 * Ends agent processes, waiting for them to exit (SIGCONT first so a stopped one can die), and
 * the commands they were running (their process groups, found while the agents still live: a
 * SIGKILLed agent cannot end them, and once it is gone they are no longer its children).
 */
export async function killAll(agents: readonly AgentProcess[]): Promise<void> {
  const commands = agents.flatMap((a) => agentCommands(a).map((c) => c.pid));
  for (const a of agents) {
    a.kill('SIGCONT');
    a.kill('SIGKILL');
  }
  await Promise.all(agents.map((a) => a.exited));
  await killProcessGroups(commands);
}

/** A gRPC client with `cert` (or none) trusting the server's CA. */
export function grpcClient(
  ts: Pick<TestServer, 'ca' | 'grpcTarget'>,
  cert: IssuedCert | null,
  caPem: string = ts.ca.caCertPem,
): grpc.Client {
  const creds =
    cert === null
      ? grpc.credentials.createSsl(Buffer.from(caPem))
      : grpc.credentials.createSsl(Buffer.from(caPem), Buffer.from(cert.keyPem), Buffer.from(cert.certPem));
  return new grpc.Client(ts.grpcTarget, creds, { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' });
}

export async function operatorClient(ts: Pick<TestServer, 'ca' | 'grpcTarget'>, name = 'alice'): Promise<grpc.Client> {
  return grpcClient(ts, await issueOperatorCert(ts.ca, { name }));
}

export interface ExecOutcome {
  stdout: Buffer;
  stderr: Buffer;
  items: v1.ExecOutput[];
  final: v1.ExecOutput | undefined;
  status: grpc.StatusObject;
}

/** Runs Exec and collects the stream and its status. */
export function execCollect(client: grpc.Client, req: v1.IExecRequest, deadlineMs = 120_000): Promise<ExecOutcome> {
  return new Promise((resolve) => {
    const items: v1.ExecOutput[] = [];
    const call = client.makeServerStreamRequest<v1.IExecRequest, v1.ExecOutput>(
      AgentServiceMethods.Exec.path,
      (m) => Buffer.from(v1.ExecRequest.encode(m).finish()),
      (b) => v1.ExecOutput.decode(b),
      req,
      new grpc.Metadata(),
      { deadline: Date.now() + deadlineMs },
    );
    call.on('data', (m: v1.ExecOutput) => items.push(m));
    call.on('error', () => undefined);
    call.on('status', (status: grpc.StatusObject) => {
      const pick = (s: v1.ExecOutput.Stream): Buffer => Buffer.concat(items.filter((i) => i.stream === s).map((i) => Buffer.from(i.data)));
      resolve({
        stdout: pick(v1.ExecOutput.Stream.STREAM_STDOUT),
        stderr: pick(v1.ExecOutput.Stream.STREAM_STDERR),
        items,
        final: items.find((i) => i.complete),
        status,
      });
    });
  });
}

/** A Connect stream driven by hand (raw bytes out, decoded ManagementMessages in). */
export interface RawConnect {
  readonly call: grpc.ClientDuplexStream<Buffer, Buffer>;
  readonly messages: v1.ManagementMessage[];
  /** Resolves with the call's final status. */
  readonly status: Promise<grpc.StatusObject>;
  send(message: v1.IAgentMessage): void;
  sendRaw(bytes: Buffer): void;
  /** Resolves with the first received message matching `pred`. */
  next(pred: (m: v1.ManagementMessage) => boolean, timeoutMs?: number): Promise<v1.ManagementMessage>;
}

export function openConnect(client: grpc.Client, metadata: Record<string, string>): RawConnect {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  const call = client.makeBidiStreamRequest<Buffer, Buffer>(
    AgentServiceMethods.Connect.path,
    (b) => b,
    (b) => b,
    md,
    {},
  );
  const messages: v1.ManagementMessage[] = [];
  const waiters = new Set<() => void>();
  call.on('data', (b: Buffer) => {
    messages.push(v1.ManagementMessage.decode(b));
    for (const w of [...waiters]) w();
  });
  call.on('error', () => undefined);
  const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  return {
    call,
    messages,
    status,
    send: (m) => call.write(Buffer.from(v1.AgentMessage.encode(m).finish())),
    sendRaw: (b) => call.write(b),
    next(pred, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const m = messages.find(pred);
          if (m === undefined) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(m);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching message within ${timeoutMs} ms (got ${messages.map((x) => x.payload).join(', ')})`));
        }, timeoutMs);
        waiters.add(check);
        void status.then(() => setTimeout(check, 0));
        check();
      });
    },
  };
}

/** A registration as a well-behaved agent sends it. */
export function registration(agentId: string, instanceId: string): v1.IAgentMessage {
  return {
    registration: {
      agentId,
      instanceId,
      hostname: 'test-host',
      ipAddress: '127.0.0.1',
      profile: 'basic',
      system: { os: 'Linux test', kernel: '6.0', cpuCores: 2, memoryBytes: 1 << 30, diskBytes: 1 << 30 },
    },
  };
}
