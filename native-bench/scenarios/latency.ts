/**
 * Scenario `latency`: time from a simulated agent writing a 4 KiB chunk on its mTLS gRPC stream to
 * a subscriber having parsed it, at half of the maximum load measured in the same run: the highest
 * rate the path keeps up with when each chunk is sent alone at its due time, as in the measuring
 * window (a search of short probes, `search`). The batched maximum (32 chunks in flight, several
 * per write) is reported too, with the p99 at half of it (`halfBatched`, the definition before:
 * at half of a batched rate each chunk travelling alone costs more than twice as much, and on two
 * cores that rate asked for nearly the whole machine, so its tail measured the queue for a core
 * that the bench itself made; native-bench/README.md "latency"). The agent
 * (its own thread, paced evenly) and the subscribers (10 SSE, 10 WS, raw sockets, another thread)
 * share the client process and its clock (latency-client.ts); every chunk's latency goes into an
 * HDR histogram per transport.
 *
 * value  = p99 in ms, the worse of SSE and WS, actors in workers (target ≤ 5 ms).
 * extras = p50Ms/p99Ms/p999Ms; `histogram` {unit:'ms', percentiles:[[p, v], ...]} of every
 *          subscriber's latencies (the bench report plots it); per transport p50/p90/p99/p99.9/max;
 *          the max and half rates; event-loop delay, GC pauses and run-queue wait (schedstat: CPU
 *          and waiting-for-a-core ms per s) of the client process and of the server's process while
 *          measuring (where a tail comes from); the same with
 *          SVC_ACTORS=inline (its own histogram), and `workersVsInline` (inline p99 ÷ workers p99:
 *          above 1 means workers are faster); per mode `pacing` (chunks per wake-up of the agent:
 *          maxBurst, p99Burst; how late chunks left: lateP50Ms/lateP99Ms) and `clock` (the agent
 *          thread's clock against the subscribers', offsetMs ± boundMs).
 */
import type { BenchResult, BenchScenario, JsonValue } from '../types.js';
import { BenchClient, stopOnAbort } from './client-process.js';
import type { Pacing } from './latency-agent-protocol.js';
import { LoopMonitor, type ClockCheck, type CompactHistogram, type LoopStats, type Percentiles, type RateProbe } from './latency-client.js';
import { startBenchServer } from './stream-server.js';

const AGENT = 'bench-latency';
const COMMAND = 'cmd-latency';

interface LatencyRun {
  /** The highest paced rate the path kept up with (chunks/s), found by `search`. */
  maxRate: number;
  /** The measuring window's rate: half of maxRate. */
  rate: number;
  /** The rate with 32 chunks in flight (batched writes): the old "max". */
  batchedMaxRate: number;
  search: RateProbe[];
  /** Half of the batched maximum, for comparison with figures measured that way: rate and percentiles. */
  halfBatched: (Percentiles & { rate: number; pacing: Pacing }) | null;
  sse: Percentiles;
  ws: Percentiles;
  all: Percentiles;
  histogram: CompactHistogram;
  /** How evenly the agent thread sent during the measuring window. */
  pacing: Pacing;
  /** The agent thread's clock minus the subscribers' thread's (± bound), ms. */
  clock: ClockCheck;
  /** The client process's event loop and GC while measuring. */
  client: LoopStats | null;
  /** The server's main thread, from the end of the max-rate phase on (approximately the measuring window). */
  server?: LoopStats;
  holes: number;
  incomplete: number;
}

async function runMode(client: BenchClient, mode: 'workers' | 'inline', seconds: number): Promise<LatencyRun> {
  const server = await startBenchServer({ mode });
  const monitor = new LoopMonitor();
  let serverStats: LoopStats | undefined;
  // The client says when the measuring window starts and ends: the server's loop stats cover it.
  client.onEvent((m) => {
    if (m['event'] === 'latency.measuring') monitor.start();
    else if (m['event'] === 'latency.measured') serverStats = monitor.stop();
  });
  try {
    const tls = await server.agentTls(`i-${AGENT}`);
    const run = await client.call<LatencyRun>('latency.run', {
      target: server.grpcTarget,
      tls,
      agentId: AGENT,
      instanceId: `i-${AGENT}`,
      commandId: COMMAND,
      chunkBytes: 4096,
      sse: 10,
      ws: 10,
      sseUrl: `http://127.0.0.1:${server.http.port}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=${COMMAND}`,
      wsPort: server.ws.port,
      wsSubscribe: JSON.stringify({ type: 'subscribe', agent_id: AGENT, channels: ['output'] }),
      maxRateMs: seconds * 100,
      probeMs: Math.max(200, seconds * 40),
      warmupMs: Math.min(1000, seconds * 50),
      measureMs: seconds * 300,
      halfBatchedMs: mode === 'workers' ? seconds * 100 : 0,
    });
    if (serverStats !== undefined) run.server = serverStats;
    return run;
  } finally {
    client.onEvent(undefined);
    await server.stop();
  }
}

/** A plain-data value as the result line's JSON (the interfaces hold only numbers and strings). */
function json<T extends object>(v: T): { readonly [key: string]: JsonValue } {
  return v as unknown as { readonly [key: string]: JsonValue };
}

function withoutHistogram(r: LatencyRun): Omit<LatencyRun, 'histogram' | 'holes' | 'incomplete'> {
  const { histogram: _h, holes: _holes, incomplete: _incomplete, ...rest } = r;
  return rest;
}

function p99(r: LatencyRun): number {
  return Math.max(r.sse.p99Ms, r.ws.p99Ms);
}

export const latency: BenchScenario = {
  name: 'latency',
  description: 'agent chunk (4 KiB, mTLS gRPC) to SSE and WS subscribers, p99 at half of the measured max rate',
  unit: 'ms',
  target: { valueAtMost: 5 },
  async run({ seconds, signal }): Promise<BenchResult> {
    const client = BenchClient.start();
    stopOnAbort(client, signal);
    try {
      const workers = await runMode(client, 'workers', seconds);
      const inline = await runMode(client, 'inline', seconds);
      const problems: string[] = [];
      for (const [name, r] of [
        ['workers', workers],
        ['inline', inline],
      ] as const) {
        if (r.holes > 0) problems.push(`${name}: ${r.holes} seq holes`);
        if (r.incomplete > 0) problems.push(`${name}: ${r.incomplete} subscribers did not get every chunk`);
        if (Math.abs(r.clock.offsetMs) > 0.05) problems.push(`${name}: the agent thread's clock is ${r.clock.offsetMs} ms off`);
      }
      return {
        value: p99(workers),
        ceiling: null,
        extra: {
          p50Ms: workers.all.p50Ms,
          p99Ms: p99(workers),
          p999Ms: Math.max(workers.sse.p999Ms, workers.ws.p999Ms),
          pacing: { maxBurst: workers.pacing.maxBurst, p99Burst: workers.pacing.p99Burst },
          maxRate: workers.maxRate,
          rate: workers.rate,
          batchedMaxRate: workers.batchedMaxRate,
          halfBatchedP99Ms: workers.halfBatched?.p99Ms ?? null,
          histogram: json(workers.histogram),
          workers: json(withoutHistogram(workers)),
          inline: { ...json(withoutHistogram(inline)), p99Ms: p99(inline), histogram: json(inline.histogram) },
          workersVsInline: Math.round((p99(inline) / Math.max(0.001, p99(workers))) * 100) / 100,
          notes:
            'rates in chunks/s; max = highest paced rate kept up with (search), measured at half of it; halfBatched = the same at half of the batched (32 in flight) max, the definition before; workersVsInline = inline p99 / workers p99',
        },
        problems,
      };
    } finally {
      await client.stop();
    }
  },
};
