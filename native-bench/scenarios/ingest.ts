/**
 * Scenario `ingest`: 4 simulated agents in the client process stream 4 KiB PTY-like chunks over
 * mTLS gRPC as fast as gRPC flow control lets them.
 *
 * value   = chunk bytes the server accepted per second, MB/s: decoded and de-duplicated by the
 *           agent actors in the worker shards, stored in the replay rings, and crossed to the main
 *           thread once (kFrameCommandOutput, what Exec, the command listeners and the fanout read;
 *           nobody subscribes here, so nothing is encoded), counted there.
 * ceiling = a bare grpc-js server with the same mTLS credentials and identity serializers that
 *           counts the bytes it receives and hashes each call's messages as they come (sha256: the
 *           work the measured side's consumers do to verify the output), fed the same messages by
 *           the same client code.
 * extras  = `inline` (SVC_ACTORS=inline) and `workersVsInline`; chunks/s; `verified`: every
 *           agent's stream as the main thread's consumers got it (AgentService.subscribeOutput)
 *           has the sha256 of what the agent sent (8 different chunks in turn), in both modes; a
 *           mismatch is a problem and fails the run.
 *
 * Rates are taken over the middle of the sending window (samples every 100 ms), so connection
 * set-up and the drain at the end do not count. Two rounds alternate workers, the ceiling and
 * inline (each 0.3 × --seconds), so drift on shared cores hits all three alike; each figure is
 * the mean of its rounds (`roundRatios` lists workers ÷ ceiling per round).
 */
import { createHash, type Hash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentFrameKind, outputDataBytes } from '../../actors/protocol/agent-frames.js';
import type { BenchResult, BenchScenario } from '../types.js';
import { BenchClient, stopOnAbort } from './client-process.js';
import { RawGrpc } from './raw-ceilings.js';
import type { SimAgentTls } from './sim-agent.js';
import { startBenchServer } from './stream-server.js';
import { cpuBetween, threadCpu, type ThreadCpu } from './thread-cpu.js';

const AGENTS = 4;
/** Rounds of (workers, raw, inline). */
const ROUNDS = 2;
const CHUNK_BYTES = 4096;

interface Rate {
  mbps: number;
  seconds: number;
  /** What the client sent, per agent. */
  streams: SentStream[];
  /** CPU spent on the whole phase (ms) and the bytes it counted. */
  cpu: PhaseCpu;
}

/**
 * CPU of one phase, ms: the server process's main thread, its busiest other thread (the shard
 * worker when there is one), the rest of its threads (V8's GC helpers, libuv), and the client
 * process (all its threads), with the bytes counted over the same span.
 */
interface PhaseCpu {
  mainMs: number;
  workerMs: number;
  restMs: number;
  clientMs: number;
  /** Times the main thread and the busiest other thread were put on a CPU (wake-ups, returns after preemption). */
  mainSlices: number;
  workerSlices: number;
  bytes: number;
}

interface ClientAnswer {
  streams: SentStream[];
  client: { cpuMs: number; mainMs: number };
}

interface SentStream {
  agentId: string;
  commandId: string;
  chunks: number;
  sha256: string;
}

/**
 * Runs the client for `seconds` and returns the rate of `counter()` over [warmup, seconds − 0.3 s].
 * `settle` runs after the client finished (the consumers catch up) before the CPU is read.
 */
async function sampled(
  client: BenchClient,
  args: Record<string, unknown>,
  seconds: number,
  counter: () => number,
  settle: (streams: SentStream[]) => Promise<void>,
  what: string,
): Promise<Rate> {
  const samples: Array<{ t: number; bytes: number }> = [];
  const cpu0: ThreadCpu = threadCpu();
  const bytes0 = counter();
  const at0 = process.hrtime.bigint();
  const run = client.call<ClientAnswer>('ingest.run', { ...args, seconds });
  let done = false;
  void run.finally(() => (done = true)).catch(() => undefined);
  const t0 = performance.now();
  while (!done) {
    samples.push({ t: performance.now() - t0, bytes: counter() });
    await sleep(100);
  }
  const { streams, client: clientCpu } = await run;
  await settle(streams);
  const split = cpuBetween(cpu0, threadCpu());
  const cpu = {
    mainMs: split.mainMs,
    workerMs: split.busiestMs,
    restMs: split.restMs,
    clientMs: clientCpu.cpuMs,
    mainSlices: split.mainSlices,
    workerSlices: split.busiestSlices,
    bytes: counter() - bytes0,
  };
  // The profiles' clock (V8's and `perf record -k CLOCK_MONOTONIC`), to cut them by phase.
  if (profiling)
    process.stderr.write(`[bench] ingest: phase ${what} ${at0 / 1000n}-${process.hrtime.bigint() / 1000n} us ${cpu.bytes} bytes\n`);
  // the client's clock starts after its agents registered: measure from the first bytes on
  const firstAt = samples.find((s) => s.bytes > 0)?.t ?? 0;
  const from = samples.find((s) => s.t >= firstAt + Math.min(1000, seconds * 200)) ?? samples[0]!;
  const to = [...samples].reverse().find((s) => s.t <= firstAt + seconds * 1000 - 300) ?? samples.at(-1)!;
  const secs = (to.t - from.t) / 1000;
  return { mbps: secs > 0 ? (to.bytes - from.bytes) / secs / 1e6 : 0, seconds: secs, streams, cpu };
}

/** Under --cpu-prof or --perf-basic-prof (perf record), print each phase's span on CLOCK_MONOTONIC. */
const profiling = process.execArgv.some((a) => a.startsWith('--cpu-prof') || a.startsWith('--perf-'));

interface Received {
  chunks: number;
  hash: Hash;
}

/** Something measured round by round: the server in one mode, or the raw ceiling. */
interface Phase {
  measure(round: number, seconds: number): Promise<Rate>;
  stop(): Promise<void>;
}

async function pipeline(client: BenchClient, mode: 'workers' | 'inline', problems: string[]): Promise<Phase> {
  let bytes = 0;
  const server = await startBenchServer({
    mode,
    tap: (kind, _key, payload) => {
      if (kind === AgentFrameKind.kFrameCommandOutput) bytes += outputDataBytes(payload);
    },
  });
  // What the main thread's consumers get: the one frame per chunk (views, hashed as they come).
  const received = new Map<string, Received>();
  const off = server.agents.subscribeOutput((_agentId, commandId, f) => {
    let r = received.get(commandId);
    if (r === undefined) received.set(commandId, (r = { chunks: 0, hash: createHash('sha256') }));
    r.chunks++;
    r.hash.update(f.data);
  });
  const tls = await server.agentTls('i-bench-ingest');
  const agents = Array.from({ length: AGENTS }, (_, i) => ({ tls, agentId: `bench-ingest-${i}`, instanceId: 'i-bench-ingest' }));
  return {
    async measure(round, seconds) {
      const args = { target: server.grpcTarget, agents, chunkBytes: CHUNK_BYTES, register: true, round };
      const settle = async (streams: SentStream[]): Promise<void> => {
        const all = (): boolean => streams.every((s) => (received.get(s.commandId)?.chunks ?? 0) >= s.chunks);
        for (let i = 0; i < 100 && !all(); i++) await sleep(50);
      };
      const rate = await sampled(client, args, seconds, () => bytes, settle, `${mode} ${round}`);
      for (const s of rate.streams) {
        const r = received.get(s.commandId);
        const got = r === undefined ? 'nothing' : `${r.chunks} chunks, sha256 ${r.hash.digest('hex')}`;
        if (r === undefined || r.chunks !== s.chunks || !got.endsWith(s.sha256))
          problems.push(`${mode}: ${s.agentId} sent ${s.chunks} chunks, sha256 ${s.sha256}; the consumers got ${got}`);
      }
      return rate;
    },
    async stop() {
      off();
      await server.stop();
    },
  };
}

async function ceiling(client: BenchClient, tls: SimAgentTls, ca: Parameters<typeof RawGrpc.start>[0]): Promise<Phase> {
  // The same consumer work as the pipeline's verification (a sha256 per stream over every byte it
  // gets), so the ratio is what sandboxd adds between the socket and a consumer, not the check.
  const raw = await RawGrpc.start(ca, () => {
    const hash = createHash('sha256');
    return (message) => hash.update(message);
  });
  const agents = Array.from({ length: AGENTS }, (_, i) => ({ tls, agentId: `bench-ingest-${i}`, instanceId: 'i-bench-ingest' }));
  return {
    async measure(round, seconds) {
      // The raw server counts whole messages; the chunk payload is CHUNK_BYTES of each ~CHUNK_BYTES + 40.
      const before = raw.messages;
      const args = { target: `127.0.0.1:${raw.port}`, agents, chunkBytes: CHUNK_BYTES, register: false, round };
      const rate = await sampled(
        client,
        args,
        seconds,
        () => raw.messages * CHUNK_BYTES,
        () => sleep(50),
        `raw ${round}`,
      );
      if (raw.messages === before) throw new Error('the raw gRPC server received nothing');
      return rate;
    },
    stop() {
      raw.close();
      return Promise.resolve();
    },
  };
}

/** Mean rate of the rounds. */
function mean(rates: readonly Rate[]): Rate {
  return {
    mbps: rates.reduce((n, r) => n + r.mbps, 0) / rates.length,
    seconds: rates.reduce((n, r) => n + r.seconds, 0),
    streams: rates.flatMap((r) => r.streams),
    cpu: {
      mainMs: rates.reduce((n, r) => n + r.cpu.mainMs, 0),
      workerMs: rates.reduce((n, r) => n + r.cpu.workerMs, 0),
      restMs: rates.reduce((n, r) => n + r.cpu.restMs, 0),
      clientMs: rates.reduce((n, r) => n + r.cpu.clientMs, 0),
      mainSlices: rates.reduce((n, r) => n + r.cpu.mainSlices, 0),
      workerSlices: rates.reduce((n, r) => n + r.cpu.workerSlices, 0),
      bytes: rates.reduce((n, r) => n + r.cpu.bytes, 0),
    },
  };
}

/**
 * Times per MB of output that the server's main thread (and the shard worker) went onto a CPU:
 * each is a wake-up from a wait or a return after preemption, and each costs the kernel's
 * switch and the thread's cold caches. A 4 KiB chunk stream is 244 chunks per MB.
 */
function wakeupsPerMB(c: PhaseCpu, withWorker: boolean): Record<string, number> {
  const mb = c.bytes / 1e6;
  return { main: Math.round(c.mainSlices / mb), ...(withWorker && { worker: Math.round(c.workerSlices / mb) }) };
}

/** CPU ms per MB (10^6 bytes) of output, per thread, over all rounds of a phase. */
function cpuPerMB(c: PhaseCpu, withWorker: boolean): Record<string, number> {
  const mb = c.bytes / 1e6;
  const per = (ms: number): number => Math.round((ms / mb) * 10) / 10;
  // Without a worker, the busiest other thread is one of V8's helpers: count it with the rest.
  const rest = withWorker ? c.restMs : c.restMs + c.workerMs;
  return {
    main: per(c.mainMs),
    ...(withWorker && { worker: per(c.workerMs) }),
    rest: per(rest),
    server: per(c.mainMs + c.workerMs + c.restMs),
    client: per(c.clientMs),
  };
}

export const ingest: BenchScenario = {
  name: 'ingest',
  description: '4 agents stream 4 KiB chunks over mTLS gRPC into the actors, vs a raw grpc-js TLS server counting the same messages',
  unit: 'MB/s',
  target: { ratioAtLeast: 0.8 },
  async run({ seconds, signal }): Promise<BenchResult> {
    const client = BenchClient.start();
    stopOnAbort(client, signal);
    try {
      // Rounds alternate workers, ceiling and inline, so drift on shared cores hits them alike.
      const phase = Math.max(1.5, (seconds * 0.6) / ROUNDS);
      const problems: string[] = [];
      // The ceiling needs the server's CA: the inline server's serves.
      const phases: Phase[] = [];
      const rates: Rate[][] = [[], [], []];
      try {
        const workersServer = await pipeline(client, 'workers', problems);
        phases.push(workersServer);
        const inlineServer = await pipeline(client, 'inline', problems);
        phases.push(inlineServer);
        const ca = await startBenchServer({ mode: 'inline' });
        let raw: Phase;
        try {
          raw = await ceiling(client, await ca.agentTls('i-bench-ingest'), ca.ca);
        } finally {
          await ca.stop();
        }
        phases.push(raw);
        for (let round = 0; round < ROUNDS; round++) {
          rates[0]!.push(await workersServer.measure(round, phase));
          rates[2]!.push(await raw.measure(round, phase));
          rates[1]!.push(await inlineServer.measure(round, phase));
        }
      } finally {
        for (const p of phases) await p.stop();
      }
      const [workers, inline, raw] = rates.map(mean) as [Rate, Rate, Rate];
      const r2 = (x: number): number => Math.round(x * 100) / 100;
      return {
        value: workers.mbps,
        ceiling: raw.mbps,
        extra: {
          agents: AGENTS,
          chunkBytes: CHUNK_BYTES,
          inline: r2(inline.mbps),
          inlineRatio: r2(inline.mbps / raw.mbps),
          workersVsInline: r2(workers.mbps / inline.mbps),
          chunksPerSecond: Math.round((workers.mbps * 1e6) / CHUNK_BYTES),
          verified: problems.length === 0,
          chunksVerified: [...workers.streams, ...inline.streams].reduce((n, s) => n + s.chunks, 0),
          rounds: ROUNDS,
          roundRatios: rates[0]!.map((w, i) => r2(w.mbps / rates[2]![i]!.mbps)),
          cpuMsPerMB: { workers: cpuPerMB(workers.cpu, true), raw: cpuPerMB(raw.cpu, false), inline: cpuPerMB(inline.cpu, false) },
          wakeupsPerMB: {
            workers: wakeupsPerMB(workers.cpu, true),
            raw: wakeupsPerMB(raw.cpu, false),
            inline: wakeupsPerMB(inline.cpu, false),
          },
        },
        problems,
      };
    } finally {
      await client.stop();
    }
  },
};
