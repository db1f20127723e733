/**
 * Scenario `replay`: 1,000 buffered chunks to a new SSE subscriber, against a raw uWS SSE write
 * of the same encoded bytes in the same run. A simulated agent streams 1,000 PTY-like chunks of
 * one command; then a subscriber in the client process asks `replay=true&limit=1000` on a new
 * connection, and in turn (alternating, so drift hits both alike) the same request goes to a bare
 * uWS App (raw-ceilings.ts RawSse) that writes the same head and the very bytes the server's
 * replay holds (read from the agent actor once); each time is request → the 1,000th
 * `agent_output.replay` event parsed in the client (latency-client.ts).
 *
 * value   = MB/s of the 4 KiB replay through the server (replay bytes ÷ median time), actors in
 *           workers; ceiling = the same for the raw write; ratio = raw median ÷ server median.
 * extras  = per chunk size (4 KiB, 1 KiB, 256 B) and mode: median and p90 ms of the server and of
 *           the raw write, the ratio, the replay's bytes, `actorMs` (the replay call alone,
 *           ActorSystem.call in this process) and `coldMs` (the first replay after the output
 *           arrived, which encodes the events the later ones find cached); `ms256` (workers,
 *           1,000 × 256 B, target ≤ 5 ms) and `ms256Pass`; `workersVsInline` (4 KiB, inline
 *           median ÷ workers median).
 *
 * The agent actor keeps raw chunks; the first replay encodes each chunk's event once with the live
 * encoder and caches the events together in one arena (actors/replay/command-replay.ts,
 * EventCache), so a later replay of the same chunks is a view of that memory, written to the
 * socket as it is.
 */
import { performance } from 'node:perf_hooks';
import { agentActorId } from '../../actors/protocol/agent-frames.js';
import type { ReplayAnswer } from '../../actors/protocol/output-calls.js';
import { releaseReplayBytes } from '../../actors/protocol/replay-lease.js';
import type { BenchResult, BenchScenario } from '../types.js';
import { BenchClient, stopOnAbort } from './client-process.js';
import { RawSse } from './raw-ceilings.js';
import { startBenchServer } from './stream-server.js';

const CHUNKS = 1000;
const AGENT = 'bench-replay';
const SIZES = [4096, 1024, 256] as const;
const k256TargetMs = 5;

interface Timing {
  medianMs: number;
  p90Ms: number;
  rawMedianMs: number;
  rawP90Ms: number;
  bytes: number;
  actorMs: number;
  coldMs: number;
}

function pct(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

const r2 = (x: number): number => Math.round(x * 100) / 100;
const sorted = (xs: readonly number[]): number[] => [...xs].sort((a, b) => a - b);

async function measureMode(client: BenchClient, mode: 'workers' | 'inline', iterations: number, raw: RawSse): Promise<Map<number, Timing>> {
  // Rings big enough for 1,000 chunks of 4 KiB.
  const server = await startBenchServer({ mode, replay: { ringBytes: 64 * 1024 * 1024 } });
  const out = new Map<number, Timing>();
  try {
    const tls = await server.agentTls(`i-${AGENT}`);
    const base = `http://127.0.0.1:${server.http.port}/api/v1/agent-output/stream?agent_id=${AGENT}`;
    for (const chunkBytes of SIZES) {
      const commandId = `cmd-replay-${chunkBytes}`;
      const replayUrl = `${base}&command_id=${commandId}&replay=true&limit=${CHUNKS}`;
      await client.call('replay.fill', {
        target: server.grpcTarget,
        tls,
        agentId: AGENT,
        instanceId: `i-${AGENT}`,
        commandId,
        chunkBytes,
        chunks: CHUNKS,
        liveUrl: `${base}&command_id=${commandId}`,
      });
      // The first replay encodes the events (later ones find them cached): timed on its own.
      const cold = await client.call<{ byUrl: Array<{ timesMs: number[] }> }>('replay.time', {
        urls: [replayUrl],
        chunks: CHUNKS,
        iterations: 1,
        warmup: 0,
      });
      const args = { commandId, mode: 'tail', limit: CHUNKS };
      // A copy: the answer's buffer is the shard's cache (or lent by it: replay-lease.ts).
      const once = await server.actors.call<ReplayAnswer>(agentActorId(AGENT), 'output.replay', args);
      raw.body = Buffer.from(once.bytes);
      releaseReplayBytes(once);
      const r = await client.call<{ byUrl: Array<{ timesMs: number[]; bytes: number }> }>('replay.time', {
        urls: [replayUrl, `http://127.0.0.1:${raw.port}/sse`],
        chunks: CHUNKS,
        iterations,
        warmup: 2,
      });
      const actor: number[] = [];
      for (let i = 0; i < Math.min(20, iterations); i++) {
        const t0 = performance.now();
        const a = await server.actors.call<ReplayAnswer>(agentActorId(AGENT), 'output.replay', args);
        actor.push(performance.now() - t0);
        releaseReplayBytes(a);
      }
      const [mine, theirs] = [r.byUrl[0]!, r.byUrl[1]!];
      const times = sorted(mine.timesMs);
      const rawTimes = sorted(theirs.timesMs);
      out.set(chunkBytes, {
        medianMs: pct(times, 50),
        p90Ms: pct(times, 90),
        rawMedianMs: pct(rawTimes, 50),
        rawP90Ms: pct(rawTimes, 90),
        bytes: mine.bytes,
        actorMs: pct(sorted(actor), 50),
        coldMs: cold.byUrl[0]?.timesMs[0] ?? 0,
      });
    }
  } finally {
    await server.stop();
  }
  return out;
}

function bySize(m: Map<number, Timing>): Record<string, Record<string, number>> {
  return Object.fromEntries(
    [...m].map(([size, t]) => [
      `${size}B`,
      {
        medianMs: r2(t.medianMs),
        p90Ms: r2(t.p90Ms),
        rawMedianMs: r2(t.rawMedianMs),
        rawP90Ms: r2(t.rawP90Ms),
        ratio: r2(t.rawMedianMs / Math.max(0.001, t.medianMs)),
        actorMs: r2(t.actorMs),
        coldMs: r2(t.coldMs),
        replayBytes: t.bytes,
      },
    ]),
  );
}

export const replay: BenchScenario = {
  name: 'replay',
  description:
    '1,000 buffered 4 KiB chunks to a new SSE subscriber (request to last event, median) vs a raw uWS SSE write of the same bytes; also 1 KiB and 256 B (≤ 5 ms)',
  unit: 'MB/s',
  target: { ratioAtLeast: 0.8 },
  async run({ seconds, signal }): Promise<BenchResult> {
    const client = BenchClient.start();
    stopOnAbort(client, signal);
    const raw = await RawSse.start();
    try {
      const iterations = Math.max(10, Math.round(seconds * 6));
      const workers = await measureMode(client, 'workers', iterations, raw);
      const inline = await measureMode(client, 'inline', iterations, raw);
      const w4 = workers.get(4096)!;
      const i4 = inline.get(4096)!;
      const mbps = (bytes: number, ms: number): number => bytes / 1e6 / (Math.max(0.001, ms) / 1000);
      const ms256 = workers.get(256)!.medianMs;
      return {
        value: mbps(w4.bytes, w4.medianMs),
        ceiling: mbps(w4.bytes, w4.rawMedianMs),
        extra: {
          chunks: CHUNKS,
          iterations,
          medianMs: r2(w4.medianMs),
          rawMedianMs: r2(w4.rawMedianMs),
          ms256: r2(ms256),
          ms256Pass: ms256 <= k256TargetMs,
          workers: bySize(workers),
          inline: bySize(inline),
          inlineRatio: r2(i4.rawMedianMs / Math.max(0.001, i4.medianMs)),
          workersVsInline: r2(i4.medianMs / Math.max(0.001, w4.medianMs)),
          notes:
            'ms: request to the 1,000th event in the client process, server and raw write alternating; actorMs: the replay call alone; coldMs: the first replay (encodes what later ones find cached)',
        },
      };
    } finally {
      raw.close();
      await client.stop();
    }
  },
};
