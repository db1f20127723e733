/**
 * Scenario `pty`: the PTY hot path of pty-ws.v1. A real sandbox-agent runs a session whose
 * program floods output (100-character lines in 16 KiB writes, as fast as the PTY takes them)
 * while one controller types and 50 observers watch, all on the session's pty-ws.v1 socket
 * through sandboxd's own client (src/client/pty-ws.ts) in a separate client process. Run once on
 * `pty-ws.v1.binary` (Output as PW1O binary messages) and once on `pty-ws.v1` (JSON, base64).
 *
 * value   = PTY bytes delivered to the 50 observers together per second on the binary subprotocol,
 *           MB/s, from the first byte of a flood to the last observer's last byte
 * ceiling = the same for a bare uWS App publishing the very chunks the controller received,
 *           encoded as the server encodes them, to 51 bare WebSocket clients that decode each
 *           message as the real client does: what the WebSocket fan-out alone can carry
 * target  = ratio ≥ 0.8
 * extras  = the same for JSON (`json`, `jsonVsBinary`); keystroke → echo (the controller types
 *           `K` every 40 ms during the flood, the program draws `[K<n>]` in a fixed top row; the
 *           time until the controller's output shows it) p50/p99 and HDR percentiles (`histograms`).
 *
 * The session is native/direct (the program is the PTY command, no tmux between): a tmux session
 * redraws its screen instead of passing a flood through (measured here: about 0.1 MB/s reached
 * the controller while the program wrote 15 MB/s), which would measure tmux, not the hot path.
 * Each subprotocol gets max(1, ⌊--seconds / 4⌋) floods on one session, then as many raw
 * publishes; a flood is at most a quarter MiB per --seconds (≥ 1 MiB) and is stopped after its
 * share of a quarter of --seconds; its time counts until every observer has all of it.
 *
 * Nothing may be lost: after each flood every observer must have received exactly the bytes the
 * controller did; a closed connection (slow consumer) or a PTY_OUTPUT_LAGGED error is a problem.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setImmediate as yieldNow, setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import uWS from '@trufflesuite/uws-js-unofficial';
import type { TemplatedApp, WebSocket, us_listen_socket } from '@trufflesuite/uws-js-unofficial';
import pino from 'pino';
import { authComponent } from '../../src/auth/component.js';
import { idempotencyComponent } from '../../src/idempotency/component.js';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { eventsComponent } from '../../src/events/component.js';
import { closeApp } from '../../src/http/uws-io.js';
import { ensureCa, writeAgentBundle } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { actorsComponent, httpComponent } from '../../src/server/runtime-components.js';
import { encodeBinaryOutput } from '../../src/sessions/binding/binary.js';
import { outputComponent as streamingComponent } from '../../src/streaming/component.js';
import { outputFrame, toText } from '../../src/sessions/binding/encode.js';
import { sessionsComponent } from '../../src/sessions/component.js';
import { loopbackConfig } from '../../test/support/test-config.js';
import type { BenchResult, BenchScenario, JsonValue } from '../types.js';

const OBSERVERS = 50;
/** Controller output kept for the ceiling, bytes. */
const RECORD_BYTES = 16 << 20;
const AGENT_ID = 'bench-pty';
const kAgentBin = fileURLToPath(new URL('../../src/bin/sandbox-agent.js', import.meta.url));
const kClientsScript = fileURLToPath(new URL('./pty-clients.js', import.meta.url));

/**
 * The session's program (argv: the flood's bytes): READY, then on S the flood, lowercase lines in
 * 16 KiB writes as fast as the PTY takes them, below a scroll region (row 1 stays put); E ends it
 * early; K draws `[K<n>]` in row 1; Q quits.
 */
const FLOOD_PROGRAM = `
const out = process.stdout;
const total = Number(process.argv[2]);
process.stdin.setRawMode(true);
process.stdin.resume();
const line = 'abcdefghijklmnopqrstuvwxyz0123456789'.repeat(3).slice(0, 100) + '\\r\\n';
const chunk = line.repeat(160);
let left = 0;
let keys = 0;
const pump = () => {
  if (left <= 0) return;
  const c = left >= chunk.length ? chunk : chunk.slice(0, left);
  out.write(c);
  left -= c.length;
  setImmediate(pump);
};
out.write('\\x1b[2J\\x1b[HREADY\\r\\n');
process.stdin.on('data', (d) => {
  for (const b of d) {
    if (b === 0x53 && left <= 0) {
      const rows = out.rows || 24;
      left = total;
      out.write('\\x1b[2;' + rows + 'r\\x1b[' + rows + ';1H');
      setImmediate(pump);
    } else if (b === 0x45) {
      left = 0;
    } else if (b === 0x4b) {
      keys++;
      out.write('\\x1b7\\x1b[1;1H\\x1b[2K[K' + keys + ']\\x1b8');
    } else if (b === 0x51 || b === 3) process.exit(0);
  }
});
`;

/** The client process (pty-clients.ts) over IPC with structured clone (recorded chunks are bytes). */
class Clients {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #next = 1;

  constructor() {
    this.#child = fork(kClientsScript, [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
      execArgv: process.execArgv,
    });
    this.#child.on('message', (m: { id: number; ok: boolean; result?: unknown; error?: string }) => {
      const p = this.#pending.get(m.id);
      this.#pending.delete(m.id);
      if (m.ok) p?.resolve(m.result);
      else p?.reject(new Error(`pty clients: ${m.error ?? 'failed'}`));
    });
    this.#child.on('exit', (code, signal) => {
      for (const p of this.#pending.values()) p.reject(new Error(`pty clients exited (${signal ?? code})`));
      this.#pending.clear();
    });
  }

  call<T>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#child.send({ id, op, args });
    });
  }

  stop(): void {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGKILL');
  }
}

/** The ceiling: a bare uWS App that publishes pre-encoded frames to every WebSocket, bounded by backpressure. */
class RawPublisher {
  readonly port: number;
  readonly #app: TemplatedApp;
  readonly #listen: us_listen_socket;
  readonly #sockets = new Set<WebSocket<unknown>>();

  private constructor(app: TemplatedApp, listen: us_listen_socket, sockets: Set<WebSocket<unknown>>) {
    this.#app = app;
    this.#listen = listen;
    this.#sockets = sockets;
    this.port = uWS.us_socket_local_port(listen);
  }

  static start(): Promise<RawPublisher> {
    const app = uWS.App();
    const sockets = new Set<WebSocket<unknown>>();
    app.ws('/*', {
      compression: uWS.DISABLED,
      maxBackpressure: 64 << 20,
      maxPayloadLength: 1 << 20,
      open: (ws) => {
        ws.subscribe('pty');
        sockets.add(ws);
      },
      close: (ws) => sockets.delete(ws),
    });
    return new Promise((resolve, reject) => {
      app.listen('127.0.0.1', 0, (listen) => {
        if (listen === false) return reject(new Error('raw publisher: cannot listen'));
        resolve(new RawPublisher(app, listen, sockets));
      });
    });
  }

  /** Publishes `frames` once, in order, waiting while any socket has more than 1 MiB queued. */
  async publishAll(frames: readonly (string | Uint8Array)[], binary: boolean, signal: AbortSignal): Promise<void> {
    for (let i = 0; i < frames.length && !signal.aborted;) {
      for (const end = Math.min(frames.length, i + 32); i < end; i++) this.#app.publish('pty', frames[i]!, binary);
      let most = 0;
      for (const s of this.#sockets) most = Math.max(most, s.getBufferedAmount());
      if (most > 1 << 20) await sleep(1);
      else await yieldNow();
    }
  }

  close(): void {
    uWS.us_listen_socket_close(this.#listen);
    closeApp(this.#app);
  }
}

/** What the client process's `flood` op answers (pty-clients.ts). */
interface Flood {
  /** First output byte at any client → last byte at the last observer. */
  seconds: number;
  controllerBytes: number;
  observerBytes: number;
  perObserver: number[];
  echoes: number;
  echoMissed: number;
  echo: { unit: string; count: number; percentiles: [number, number][] } | null;
  closed: string[];
  lagged: number;
  recorded: Uint8Array[];
}

function emptyFlood(): Flood {
  return {
    seconds: 0,
    controllerBytes: 0,
    observerBytes: 0,
    perObserver: [],
    echoes: 0,
    echoMissed: 0,
    echo: null,
    closed: [],
    lagged: 0,
    recorded: [],
  };
}

/** Adds flood `f` to the running total `t` (echo figures are already cumulative in the client process). */
function add(t: Flood, f: Flood): void {
  t.seconds += f.seconds;
  t.controllerBytes += f.controllerBytes;
  t.observerBytes += f.observerBytes;
  t.echoMissed += f.echoMissed;
  t.echoes = f.echoes;
  t.echo = f.echo;
  t.lagged += f.lagged;
  t.closed.push(...f.closed);
  if (f.recorded.length > 0) t.recorded = f.recorded;
}

const progress = (what: string): void => void process.stderr.write(`[bench] pty: ${what}\n`);
const mbps = (bytes: number, seconds: number): number => bytes / seconds / 1e6;
const r2 = (x: number): number => Math.round(x * 100) / 100;

async function startPtyServer(dir: string): Promise<ServerHandle> {
  const config = loopbackConfig(dir, {
    SVC_ACTORS: 'workers',
    SVC_ACTOR_SHARDS: String(Math.max(1, cpus().length - 1)),
    SVC_AGENT_HEARTBEAT_SECONDS: '30',
  });
  return await startServer(config, pino({ level: 'silent' }), {
    components: [
      authComponent,
      idempotencyComponent,
      eventsComponent({ maxEvents: 1000 }),
      actorsComponent,
      agentsComponent,
      streamingComponent(),
      sessionsComponent(),
      httpComponent,
      agentListenerComponent,
    ],
    metrics: createMetrics({ defaultMetrics: false }),
  });
}

/** A sandbox-agent with its own tmux server and an empty HOME, as the sessions tests run it. */
async function spawnAgent(server: ServerHandle, dir: string): Promise<{ child: ChildProcess; env: NodeJS.ProcessEnv; log: () => string }> {
  const config = server.config;
  const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
  const certs = join(dir, 'agent-certs');
  await writeAgentBundle(certs, ca, { instanceId: AGENT_ID });
  const tmuxDir = await mkdtemp(join(tmpdir(), 'sxb-'));
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: dir, TMUX_TMPDIR: tmuxDir, TERM: 'xterm-256color', LANG: 'C.UTF-8' };
  for (const k of ['TMUX', 'BASH_ENV', 'ENV']) delete env[k];
  const args = [
    kAgentBin,
    '--server',
    `127.0.0.1:${server.ports.grpc}`,
    '--certs',
    certs,
    '--agent-id',
    AGENT_ID,
    '--instance-id',
    AGENT_ID,
  ];
  const child = spawn(process.execPath, [...args, '--work-dir', dir, '--log-level', 'warn'], { stdio: ['ignore', 'ignore', 'pipe'], env });
  let log = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (log = (log + d).slice(-4000)));
  return { child, env, log: () => log };
}

async function json<T>(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(base + path, {
    method,
    ...(body !== undefined && { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  const text = await res.text();
  return { status: res.status, body: (text === '' ? {} : JSON.parse(text)) as T };
}

async function until<T>(what: string, check: () => Promise<T | undefined>, signal: AbortSignal, deadlineMs = 30_000): Promise<T> {
  const end = performance.now() + deadlineMs;
  for (;;) {
    signal.throwIfAborted();
    const v = await check().catch(() => undefined);
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

interface ModeResult {
  real: Flood;
  raw: Flood;
}

export const pty: BenchScenario = {
  name: 'pty',
  description: 'PTY flood to a typing controller and 50 observers over pty-ws.v1 (binary and JSON), keystroke → echo',
  unit: 'MB/s',
  target: { ratioAtLeast: 0.8 },
  async run({ seconds, signal }): Promise<BenchResult> {
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-bench-pty-'));
    const cleanup: (() => Promise<void> | void)[] = [() => rm(dir, { recursive: true, force: true })];
    const problems: string[] = [];
    try {
      const server = await startPtyServer(dir);
      cleanup.unshift(() => server.stop());
      const agent = await spawnAgent(server, dir);
      cleanup.unshift(async () => {
        agent.child.kill('SIGKILL');
        await new Promise<void>((r) =>
          spawn('tmux', ['-L', 'sandboxd', 'kill-server'], { env: agent.env, stdio: 'ignore' })
            .once('exit', () => r())
            .once('error', () => r()),
        );
      });
      const base = `http://127.0.0.1:${server.ports.http}`;
      progress('server up, waiting for the agent');
      await until(
        'the agent to connect',
        async () => {
          const { body } = await json<{ agents: { id: string; status: string }[] }>(base, 'GET', '/api/v1/agents');
          return body.agents.some((a) => a.id === AGENT_ID && a.status !== 'Disconnected') ? true : undefined;
        },
        signal,
      ).catch((err: Error) => {
        throw new Error(`${err.message}; agent log: ${agent.log()}`);
      });
      const program = join(dir, 'flood.cjs');
      await writeFile(program, FLOOD_PROGRAM);
      const wsBase = `ws://127.0.0.1:${server.ports.http}`;

      const clients = new Clients();
      cleanup.unshift(() => clients.stop());
      signal.addEventListener('abort', () => clients.stop(), { once: true });
      const raw = await RawPublisher.start();
      cleanup.unshift(() => raw.close());

      // a quarter MiB per --seconds (at least 1 MiB) per subprotocol, stopped (E) after a quarter
      // of --seconds: what the program wrote must reach every client before the flood ends, and
      // on a loaded machine that drains at a few MB/s per client
      const floodBytes = Math.round(Math.min(32, Math.max(1, seconds / 4)) * (1 << 20));
      const rounds = Math.max(1, Math.floor(seconds / 4));
      const windowMs = Math.max(500, (seconds * 1000) / (4 * rounds));
      const runMode = async (binary: boolean): Promise<ModeResult> => {
        const name = binary ? 'binary' : 'json';
        // a native/direct session per subprotocol, started by the controller's join (spec 4.2)
        const sessionId = randomUUID();
        await clients.call('open', {
          controllerUrl: `${wsBase}/agents/${AGENT_ID}/sessions/${sessionId}/attach`,
          url: `${wsBase}/api/v1/sessions/${sessionId}/pty`,
          binary,
          observers: OBSERVERS,
          start: {
            session_backend: 'native',
            session_class: 'direct',
            argv: [process.execPath, program, String(floodBytes)],
            terminal_size: { cols: 120, rows: 30 },
          },
        });
        await clients.call('waitFor', { text: 'READY', ms: 30_000 });
        progress(`${name}: session ${sessionId} with ${OBSERVERS + 1} clients; flooding ${floodBytes} bytes`);
        const real = emptyFlood();
        for (let round = 0; round < rounds; round++) {
          await clients.call('arm', { base: round === 0 });
          const f = await clients.call<Flood>('flood', {
            typing: true,
            floodBytes,
            stopAfterMs: windowMs,
            quietMs: 500,
            recordBytes: round === 0 ? RECORD_BYTES : 0,
            echoKey: name,
          });
          for (const c of f.closed) problems.push(`${name}: ${c}`);
          if (f.lagged > 0) problems.push(`${name}: ${f.lagged} PTY_OUTPUT_LAGGED errors`);
          add(real, f);
          if (f.closed.length > 0) break;
        }
        // nothing lost: over all floods, every observer got exactly the controller's bytes
        const all = await clients.call<{ controllerBytes: number; perObserver: number[]; keyframes: number[]; differences: string[] }>(
          'totals',
          {
            quietMs: 1000,
          },
        );
        const short = all.perObserver.filter((b) => b !== all.controllerBytes);
        if (short.length > 0)
          problems.push(
            `${name}: ${short.length} observers did not get the controller's ${all.controllerBytes} bytes (e.g. ${short[0]}); keyframes drawn: controller ${all.keyframes[0]}, observers up to ${Math.max(...all.keyframes.slice(1))}; ${all.differences.join('; ')}`,
          );
        await clients.call('type', { text: 'Q' });
        await clients.call('close');
        if (real.recorded.length === 0) throw new Error(`${name}: the controller received no output during the flood`);
        // the ceiling: the same chunks, encoded as the hub encodes them, published by bare uWS
        const frames = real.recorded.map((b, i) =>
          binary
            ? encodeBinaryOutput(i + 1, b)
            : toText(outputFrame(i + 1, b, 'stdout', { id: `bench-${i}`, ts: new Date().toISOString() })),
        );
        await clients.call('open', { url: `ws://127.0.0.1:${raw.port}/`, binary, observers: OBSERVERS, raw: true });
        const rawFlood = emptyFlood();
        for (let round = 0; round < rounds; round++) {
          await clients.call('arm');
          const measuring = clients.call<Flood>('flood', { quietMs: 300 });
          await raw.publishAll(frames, binary, signal);
          add(rawFlood, await measuring);
        }
        await clients.call('close');
        progress(
          `${name}: ${(real.controllerBytes / 1e6).toFixed(1)} MB to each client in ${real.seconds.toFixed(2)} s over ${rounds} floods (raw: ${rawFlood.seconds.toFixed(2)} s), ${real.echoes} echoes`,
        );
        return { real: { ...real, recorded: [] }, raw: rawFlood };
      };
      const binary = await runMode(true);
      const jsonMode = await runMode(false);

      const figures = (m: ModeResult): Record<string, JsonValue> => {
        const observers = mbps(m.real.observerBytes, m.real.seconds);
        const ceiling = mbps(m.raw.observerBytes, m.raw.seconds);
        const p = (q: number): number | null => m.real.echo?.percentiles.find(([x]) => x === q)?.[1] ?? null;
        return {
          observersMBps: r2(observers),
          ceilingMBps: r2(ceiling),
          ratio: Math.round((observers / ceiling) * 1000) / 1000,
          seconds: r2(m.real.seconds),
          ceilingSeconds: r2(m.raw.seconds),
          echoP50Ms: p(50),
          echoP99Ms: p(99),
          echoes: m.real.echoes,
          echoMissed: m.real.echoMissed,
          bytesPerClient: m.real.controllerBytes,
          floods: rounds,
        };
      };
      const b = figures(binary);
      const j = figures(jsonMode);
      const histograms: Record<string, JsonValue> = {};
      if (binary.real.echo) histograms['echo pty-ws.v1.binary'] = binary.real.echo;
      if (jsonMode.real.echo) histograms['echo pty-ws.v1'] = jsonMode.real.echo;
      return {
        value: mbps(binary.real.observerBytes, binary.real.seconds),
        ceiling: mbps(binary.raw.observerBytes, binary.raw.seconds),
        extra: {
          observers: OBSERVERS,
          binary: b,
          json: j,
          jsonVsBinary: Math.round(((j['observersMBps'] as number) / Math.max(1e-9, b['observersMBps'] as number)) * 1000) / 1000,
          histograms,
          notes:
            "MB/s of PTY bytes (before encoding) delivered to the 50 observers together, first byte to the last observer's last byte of one flood per subprotocol (native/direct session); ceiling = bare uWS publish of the chunks the controller received, same encoding, to 51 bare clients; echo = keystroke K to [K<n>] on the controller screen during the flood, ms",
        },
        problems,
      };
    } finally {
      for (const c of cleanup) await Promise.resolve(c()).catch(() => undefined);
    }
  },
};
