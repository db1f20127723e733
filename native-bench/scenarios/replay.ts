/**
 * Scenario `replay`: 1,000 buffered chunks to a new subscriber. A simulated agent streams 1,000
 * PTY-like chunks of one command; then a subscriber in the client process asks
 * `replay=true&limit=1000` again and again, each time on a new connection, and the time from its
 * request to its parsing the 1,000th `agent_output.replay` event is recorded (latency-client.ts).
 *
 * value  = median of those times, ms, 4 KiB chunks, actors in workers (target ≤ 5 ms).
 * extras = p90 and bytes per replay; the same for 1 KiB and 256 B chunks; inline figures and
 *          `workersVsInline` (inline median ÷ workers median); `actorMs`, the median time of the
 *          replay call alone (ActorSystem.call to the agent actor, built and copied back), measured
 *          in this process.
 *
 * The actor keeps every chunk's encoded event (the SSE tail) in its ring, so a replay is one
 * concatenation: no base64, UTF-8 or JSON work (actors/replay/command-replay.ts).
 */
import { performance } from 'node:perf_hooks';
import { agentActorId } from '../../actors/protocol/agent-frames.js';
import type { BenchResult, BenchScenario } from '../types.js';
import { BenchClient, stopOnAbort } from './client-process.js';
import { startBenchServer } from './stream-server.js';

const CHUNKS = 1000;
const AGENT = 'bench-replay';

interface Timing {
  medianMs: number;
  p90Ms: number;
  bytes: number;
  actorMs: number;
}

function pct(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

const r2 = (x: number): number => Math.round(x * 100) / 100;

async function measureMode(
  client: BenchClient,
  mode: 'workers' | 'inline',
  chunkSizes: readonly number[],
  iterations: number,
): Promise<Map<number, Timing>> {
  // Rings big enough for 1,000 encoded 4 KiB chunks (≈ 10 KiB each).
  const server = await startBenchServer({ mode, replay: { ringBytes: 64 * 1024 * 1024 } });
  const out = new Map<number, Timing>();
  try {
    const tls = await server.agentTls(`i-${AGENT}`);
    for (const chunkBytes of chunkSizes) {
      const commandId = `cmd-replay-${chunkBytes}`;
      const r = await client.call<{ timesMs: number[]; bytes: number }>('replay.run', {
        target: server.grpcTarget,
        tls,
        agentId: AGENT,
        instanceId: `i-${AGENT}`,
        commandId,
        chunkBytes,
        chunks: CHUNKS,
        replayUrl: `http://127.0.0.1:${server.http.port}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=${commandId}&replay=true&limit=${CHUNKS}`,
        liveUrl: `http://127.0.0.1:${server.http.port}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=${commandId}`,
        iterations,
        warmup: 3,
      });
      const actor: number[] = [];
      for (let i = 0; i < Math.min(20, iterations); i++) {
        const t0 = performance.now();
        await server.actors.call(agentActorId(AGENT), 'output.replay', { commandId, mode: 'tail', limit: CHUNKS });
        actor.push(performance.now() - t0);
      }
      const times = [...r.timesMs].sort((a, b) => a - b);
      actor.sort((a, b) => a - b);
      out.set(chunkBytes, { medianMs: pct(times, 50), p90Ms: pct(times, 90), bytes: r.bytes, actorMs: pct(actor, 50) });
    }
  } finally {
    await server.stop();
  }
  return out;
}

export const replay: BenchScenario = {
  name: 'replay',
  description: '1,000 buffered chunks (4 KiB; also 1 KiB, 256 B) to a new SSE subscriber: request to last event, median',
  unit: 'ms',
  target: { valueAtMost: 5 },
  async run({ seconds, signal }): Promise<BenchResult> {
    const client = BenchClient.start();
    stopOnAbort(client, signal);
    try {
      const sizes = [4096, 1024, 256];
      const iterations = Math.max(8, Math.round(seconds * 6));
      const workers = await measureMode(client, 'workers', sizes, iterations);
      const inline = await measureMode(client, 'inline', sizes, iterations);
      const w4 = workers.get(4096)!;
      const i4 = inline.get(4096)!;
      const bySize = (m: Map<number, Timing>): Record<string, { medianMs: number; p90Ms: number; actorMs: number; replayBytes: number }> =>
        Object.fromEntries(
          [...m].map(([size, t]) => [
            `${size}B`,
            { medianMs: r2(t.medianMs), p90Ms: r2(t.p90Ms), actorMs: r2(t.actorMs), replayBytes: t.bytes },
          ]),
        );
      return {
        value: w4.medianMs,
        ceiling: null,
        extra: {
          chunks: CHUNKS,
          iterations,
          workers: bySize(workers),
          inline: bySize(inline),
          workersVsInline: r2(i4.medianMs / Math.max(0.001, w4.medianMs)),
          notes: 'medianMs: request to the 1,000th event in the client process; actorMs: the replay call alone',
        },
      };
    } finally {
      await client.stop();
    }
  },
};
