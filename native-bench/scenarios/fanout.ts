/**
 * Scenario `fanout`: one agent's PTY-like output (4 KiB chunks, coloured log lines) to 100 WS and
 * 100 SSE subscribers, all in a separate client process (bench-client.ts); the simulated agent
 * runs in a second client process.
 *
 * value   = bytes delivered to the subscribers per second, MB/s, through the whole server
 *           (mTLS gRPC → agent actor in a worker shard → encode once → SAB ring → uWS fanout),
 *           actors in workers.
 * ceiling = the same frames (the server's own bytes, seq rewritten per chunk) written by a bare
 *           uWS App in this process: res.write to each SSE stream, app.publish for WS.
 * extras  = `inline` (the same with SVC_ACTORS=inline), `workersVsInline`, chunks, per-phase
 *           figures, and the loss check.
 *
 * Flow control: the server never slows an agent for its subscribers (a slow one is cut off), so
 * to measure the most it can deliver without cutting anyone off the producer keeps at most 32
 * chunks ahead of the slowest subscriber: the subscriber process sends the slowest seq every 2 ms;
 * the raw loop reads it directly, the simulated agent (in a second client process, so that the
 * subscriber process does the same work in both phases) gets it forwarded. Every subscriber
 * checks that it got every seq in order; a hole, a cut-off or a missing tail is a problem.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { BenchResult, BenchScenario } from '../types.js';
import { BenchClient, stopOnAbort } from './client-process.js';
import { FrameTemplate, RawFanout } from './raw-ceilings.js';
import { ptyText } from './sim-agent.js';
import { startBenchServer } from './stream-server.js';

const SUBSCRIBERS = 100;
const CHUNK_BYTES = 4096;
const WINDOW_CHUNKS = 32;
const AGENT = 'bench-fanout';
const COMMAND = 'cmd-fanout';

interface Phase {
  bytes: number;
  seconds: number;
  chunks?: number;
  lastSeq: number;
  minSeq: number;
  holes: number;
  errors: number;
  closed: number;
  incomplete: number;
}

function mbps(p: Phase): number {
  return p.bytes / p.seconds / 1e6;
}

function problemsOf(name: string, p: Phase): string[] {
  const out: string[] = [];
  if (p.holes > 0) out.push(`${name}: ${p.holes} seq holes`);
  if (p.errors > 0) out.push(`${name}: ${p.errors} agent_output.error events`);
  if (p.closed > 0) out.push(`${name}: ${p.closed} subscribers closed`);
  if (p.incomplete > 0) out.push(`${name}: ${p.incomplete} subscribers did not get everything (min seq ${p.minSeq} of ${p.lastSeq})`);
  return out;
}

async function ceiling(client: BenchClient, warmupMs: number, measureMs: number): Promise<Phase> {
  const raw = await RawFanout.start(16 * 1024 * 1024);
  try {
    await client.call('fanout.connect', {
      sseUrl: `http://127.0.0.1:${raw.port}/sse`,
      wsPort: raw.port,
      sse: SUBSCRIBERS,
      ws: SUBSCRIBERS,
    });
    const frames = new FrameTemplate(AGENT, COMMAND, ptyText(CHUNK_BYTES, 0));
    let acked = 0;
    let wake: (() => void) | undefined;
    client.onEvent((m) => {
      if (m['event'] === 'ack') {
        acked = Number(m['min']);
        wake?.();
      }
    });
    let running = true;
    let seq = 0;
    const loop = (async () => {
      while (running) {
        if (seq - acked >= WINDOW_CHUNKS) {
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, 20);
            wake = () => {
              clearTimeout(t);
              wake = undefined;
              resolve();
            };
          });
          continue;
        }
        seq++;
        frames.seq(seq);
        raw.send(frames.sse, frames.ws);
        if ((seq & 3) === 0) await yieldToLoop();
      }
    })();
    const m = await client.call<{ bytes: number; seconds: number }>('fanout.follow', { warmupMs, measureMs });
    running = false;
    await loop;
    client.onEvent(undefined);
    const v = await client.call<Omit<Phase, 'bytes' | 'seconds'>>('fanout.verify', { lastSeq: seq });
    await client.call('fanout.close');
    return { ...m, ...v, chunks: seq };
  } finally {
    raw.close();
  }
}

async function pipeline(
  client: BenchClient,
  producer: BenchClient,
  mode: 'workers' | 'inline',
  warmupMs: number,
  measureMs: number,
): Promise<Phase> {
  const server = await startBenchServer({ mode });
  try {
    const tls = await server.agentTls(`i-${AGENT}`);
    await client.call('fanout.connect', {
      sseUrl: `http://127.0.0.1:${server.http.port}/api/v1/agent-output/stream?agent_id=${AGENT}&command_id=${COMMAND}`,
      wsPort: server.ws.port,
      wsSubscribe: JSON.stringify({ type: 'subscribe', agent_id: AGENT, channels: ['output'] }),
      sse: SUBSCRIBERS,
      ws: SUBSCRIBERS,
    });
    client.onEvent((m) => {
      if (m['event'] === 'ack') producer.notify(m);
    });
    const produced = producer.call<{ chunks: number }>('fanout.agent', {
      target: server.grpcTarget,
      tls,
      agentId: AGENT,
      instanceId: `i-${AGENT}`,
      commandId: COMMAND,
      chunkBytes: CHUNK_BYTES,
      windowChunks: WINDOW_CHUNKS,
      runMs: warmupMs + measureMs + 200,
    });
    const m = await client.call<{ bytes: number; seconds: number }>('fanout.follow', { warmupMs, measureMs });
    const { chunks } = await produced;
    client.onEvent(undefined);
    const v = await client.call<Omit<Phase, 'bytes' | 'seconds'>>('fanout.verify', { lastSeq: chunks });
    await client.call('fanout.close');
    return { ...m, ...v, chunks };
  } finally {
    await server.stop();
  }
}

export const fanout: BenchScenario = {
  name: 'fanout',
  description:
    "one agent's PTY output (4 KiB chunks) to 100 WS + 100 SSE subscribers in a client process, vs a raw uWS publish / SSE write loop of the same frames",
  unit: 'MB/s',
  target: { ratioAtLeast: 0.8 },
  async run({ seconds, signal }): Promise<BenchResult> {
    const client = BenchClient.start();
    const producer = BenchClient.start();
    stopOnAbort(client, signal);
    stopOnAbort(producer, signal);
    try {
      const warmupMs = Math.min(1000, seconds * 150);
      const measureMs = seconds * 550;
      const raw = await ceiling(client, warmupMs, measureMs);
      const workers = await pipeline(client, producer, 'workers', warmupMs, measureMs);
      const inline = await pipeline(client, producer, 'inline', warmupMs, measureMs);
      const problems = [...problemsOf('raw', raw), ...problemsOf('workers', workers), ...problemsOf('inline', inline)];
      const round = (x: number): number => Math.round(x * 100) / 100;
      return {
        value: mbps(workers),
        ceiling: mbps(raw),
        extra: {
          subscribers: { ws: SUBSCRIBERS, sse: SUBSCRIBERS },
          chunkBytes: CHUNK_BYTES,
          inline: round(mbps(inline)),
          inlineRatio: round(mbps(inline) / mbps(raw)),
          workersVsInline: round(mbps(workers) / mbps(inline)),
          chunksPerSecond: {
            workers: Math.round((workers.chunks ?? 0) / (workers.seconds + warmupMs / 1000)),
            raw: Math.round((raw.chunks ?? 0) / (raw.seconds + warmupMs / 1000)),
          },
          chunks: { workers: workers.chunks ?? 0, inline: inline.chunks ?? 0, raw: raw.chunks ?? 0 },
          lost: workers.holes + inline.holes + raw.holes,
        },
        problems,
      };
    } finally {
      await Promise.all([client.stop(), producer.stop()]);
    }
  },
};
