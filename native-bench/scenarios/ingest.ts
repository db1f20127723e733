/**
 * Scenario `ingest`: 4 simulated agents in the client process stream 4 KiB PTY-like chunks over
 * mTLS gRPC as fast as gRPC flow control lets them.
 *
 * value   = chunk bytes the server accepted per second, MB/s: decoded and de-duplicated by the
 *           agent actors in the worker shards, stored in the replay rings, and crossed to the main
 *           thread once (kFrameCommandOutput, what Exec, the command listeners and the fanout read;
 *           nobody subscribes here, so nothing is encoded), counted there.
 * ceiling = a bare grpc-js server with the same mTLS credentials and identity serializers that only
 *           counts the bytes it receives, fed the same messages by the same client code.
 * extras  = `inline` (SVC_ACTORS=inline) and `workersVsInline`; chunks/s; `verified`: every
 *           agent's stream as the main thread's consumers got it (AgentService.subscribeOutput)
 *           has the sha256 of what the agent sent (8 different chunks in turn), in both modes; a
 *           mismatch is a problem and fails the run.
 *
 * Rates are taken over the middle of the sending window (samples every 100 ms), so connection
 * set-up and the drain at the end do not count.
 */
import { createHash, type Hash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentFrameKind, kOutputHeaderBytes } from '../../actors/protocol/agent-frames.js';
import type { BenchResult, BenchScenario } from '../types.js';
import { BenchClient, stopOnAbort } from './client-process.js';
import { RawGrpc } from './raw-ceilings.js';
import type { SimAgentTls } from './sim-agent.js';
import { startBenchServer } from './stream-server.js';

const AGENTS = 4;
const CHUNK_BYTES = 4096;

interface Rate {
  mbps: number;
  seconds: number;
  /** What the client sent, per agent. */
  streams: SentStream[];
}

interface SentStream {
  agentId: string;
  commandId: string;
  chunks: number;
  sha256: string;
}

/** Runs the client for `seconds` and returns the rate of `counter()` over [warmup, seconds − 0.3 s]. */
async function sampled(client: BenchClient, args: Record<string, unknown>, seconds: number, counter: () => number): Promise<Rate> {
  const samples: Array<{ t: number; bytes: number }> = [];
  const run = client.call<{ streams: SentStream[] }>('ingest.run', { ...args, seconds });
  let done = false;
  void run.finally(() => (done = true)).catch(() => undefined);
  const t0 = performance.now();
  while (!done) {
    samples.push({ t: performance.now() - t0, bytes: counter() });
    await sleep(100);
  }
  const { streams } = await run;
  // the client's clock starts after its agents registered: measure from the first bytes on
  const firstAt = samples.find((s) => s.bytes > 0)?.t ?? 0;
  const from = samples.find((s) => s.t >= firstAt + Math.min(1000, seconds * 200)) ?? samples[0]!;
  const to = [...samples].reverse().find((s) => s.t <= firstAt + seconds * 1000 - 300) ?? samples.at(-1)!;
  const secs = (to.t - from.t) / 1000;
  return { mbps: secs > 0 ? (to.bytes - from.bytes) / secs / 1e6 : 0, seconds: secs, streams };
}

interface Received {
  chunks: number;
  hash: Hash;
}

async function pipeline(client: BenchClient, mode: 'workers' | 'inline', seconds: number, problems: string[]): Promise<Rate> {
  let bytes = 0;
  const server = await startBenchServer({
    mode,
    tap: (kind, _key, payload) => {
      if (kind === AgentFrameKind.kFrameCommandOutput) bytes += payload.byteLength - kOutputHeaderBytes;
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
  try {
    const tls = await server.agentTls('i-bench-ingest');
    const agents = Array.from({ length: AGENTS }, (_, i) => ({ tls, agentId: `bench-ingest-${i}`, instanceId: 'i-bench-ingest' }));
    const rate = await sampled(
      client,
      { target: server.grpcTarget, agents, chunkBytes: CHUNK_BYTES, register: true },
      seconds,
      () => bytes,
    );
    const all = (): boolean => rate.streams.every((s) => (received.get(s.commandId)?.chunks ?? 0) >= s.chunks);
    for (let i = 0; i < 100 && !all(); i++) await sleep(50);
    for (const s of rate.streams) {
      const r = received.get(s.commandId);
      const got = r === undefined ? 'nothing' : `${r.chunks} chunks, sha256 ${r.hash.digest('hex')}`;
      if (r === undefined || r.chunks !== s.chunks || !got.endsWith(s.sha256))
        problems.push(`${mode}: ${s.agentId} sent ${s.chunks} chunks, sha256 ${s.sha256}; the consumers got ${got}`);
    }
    return rate;
  } finally {
    off();
    await server.stop();
  }
}

async function ceiling(client: BenchClient, tls: SimAgentTls, ca: Parameters<typeof RawGrpc.start>[0], seconds: number): Promise<Rate> {
  const raw = await RawGrpc.start(ca);
  try {
    const agents = Array.from({ length: AGENTS }, (_, i) => ({ tls, agentId: `bench-ingest-${i}`, instanceId: 'i-bench-ingest' }));
    // The raw server counts whole messages; the chunk payload is CHUNK_BYTES of each ~CHUNK_BYTES + 40.
    let perMessage = 0;
    const rate = await sampled(
      client,
      { target: `127.0.0.1:${raw.port}`, agents, chunkBytes: CHUNK_BYTES, register: false },
      seconds,
      () => {
        perMessage = raw.messages;
        return raw.messages * CHUNK_BYTES;
      },
    );
    if (perMessage === 0) throw new Error('the raw gRPC server received nothing');
    return rate;
  } finally {
    raw.close();
  }
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
      const phase = Math.max(1.5, seconds * 0.8);
      const problems: string[] = [];
      const workers = await pipeline(client, 'workers', phase, problems);
      const inline = await pipeline(client, 'inline', phase, problems);
      // The ceiling needs the server's CA: a throwaway server provides it.
      const server = await startBenchServer({ mode: 'inline' });
      let raw: Rate;
      try {
        const tls = await server.agentTls('i-bench-ingest');
        raw = await ceiling(client, tls, server.ca, phase);
      } finally {
        await server.stop();
      }
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
        },
        problems,
      };
    } finally {
      await client.stop();
    }
  },
};
