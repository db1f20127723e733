/**
 * Scenario `latency`: time from a simulated agent writing a 4 KiB chunk on its mTLS gRPC stream to
 * a subscriber having parsed it, at half of the maximum rate measured in the same run. The agent
 * and the subscribers (10 SSE, 10 WS, raw sockets) share the client process and its clock
 * (latency-client.ts); every chunk's latency goes into an HDR histogram per transport.
 *
 * value  = p99 in ms, the worse of SSE and WS, actors in workers (target ≤ 5 ms).
 * extras = p50/p90/max per transport, the max and half rates, the same with SVC_ACTORS=inline,
 *          and `workersVsInline` (inline p99 ÷ workers p99: above 1 means workers are faster).
 */
import type { BenchResult, BenchScenario } from '../types.js';
import { BenchClient, stopOnAbort } from './client-process.js';
import type { Percentiles } from './latency-client.js';
import { startBenchServer } from './stream-server.js';

const AGENT = 'bench-latency';
const COMMAND = 'cmd-latency';

interface LatencyRun {
  maxRate: number;
  rate: number;
  sse: Percentiles;
  ws: Percentiles;
  holes: number;
  incomplete: number;
}

async function runMode(client: BenchClient, mode: 'workers' | 'inline', seconds: number): Promise<LatencyRun> {
  const server = await startBenchServer({ mode });
  try {
    const tls = await server.agentTls(`i-${AGENT}`);
    return await client.call<LatencyRun>('latency.run', {
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
      maxRateMs: seconds * 200,
      warmupMs: Math.min(1000, seconds * 100),
      measureMs: seconds * 300,
    });
  } finally {
    await server.stop();
  }
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
      }
      return {
        value: p99(workers),
        ceiling: null,
        extra: {
          workers: { maxRate: workers.maxRate, rate: workers.rate, sse: { ...workers.sse }, ws: { ...workers.ws } },
          inline: { maxRate: inline.maxRate, rate: inline.rate, sse: { ...inline.sse }, ws: { ...inline.ws }, p99Ms: p99(inline) },
          workersVsInline: Math.round((p99(inline) / Math.max(0.001, p99(workers))) * 100) / 100,
          notes: 'rates in chunks/s; workersVsInline = inline p99 / workers p99',
        },
        problems,
      };
    } finally {
      await client.stop();
    }
  },
};
