/**
 * Client-process side of the `latency` and `replay` scenarios (bench-client.ts dispatches here).
 *
 * latency: one simulated agent and a few subscribers in this process, so the time from the agent
 * writing a chunk to a subscriber parsing it is measured on one clock (performance.now). First the
 * maximum rate (chunks/s with a window of 32 chunks in flight), then half of it, paced every
 * millisecond, with every chunk's latency in an HDR histogram per transport.
 *
 * replay: one agent streams `chunks` chunks of a command (replay.fill); then new subscribers ask
 * for replay=true&limit=<chunks> and, in turn, the raw ceiling's copy of the same bytes
 * (replay.time); each time is request → last replayed event parsed.
 */
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import * as hdr from 'hdr-histogram-js';
import { minSeq, SseSubscriber, WsSubscriber, type LightSubscriber } from './light-subscribers.js';
import { ptyText, SimAgent, type SimAgentTls } from './sim-agent.js';

type Args = Record<string, unknown>;

export interface Percentiles {
  count: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
}

/** The histogram in compact form for the result line: [percentile, value] pairs (bench report plots). */
export interface CompactHistogram {
  unit: 'ms';
  percentiles: Array<[number, number]>;
}

/** Where the compact form samples the distribution: dense in the tail, where the target is. */
const kPlotPercentiles = [0, 10, 25, 50, 75, 90, 95, 97.5, 99, 99.5, 99.75, 99.9, 99.95, 99.99, 100];

/** What this process saw of its own event loop and GC while measuring (the client's share of the tail). */
export interface LoopStats {
  /** Event-loop delay (monitorEventLoopDelay, 1 ms resolution), ms. */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  gcCount: number;
  gcTotalMs: number;
  gcMaxMs: number;
}

/** Measures this thread's event-loop delay and GC pauses from start() to stop(). */
export class LoopMonitor {
  readonly #delay = monitorEventLoopDelay({ resolution: 1 });
  readonly #gc: PerformanceObserver;
  #gcCount = 0;
  #gcTotal = 0;
  #gcMax = 0;

  constructor() {
    this.#gc = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        this.#gcCount++;
        this.#gcTotal += e.duration;
        if (e.duration > this.#gcMax) this.#gcMax = e.duration;
      }
    });
  }

  start(): void {
    this.#delay.enable();
    this.#gc.observe({ entryTypes: ['gc'] });
  }

  stop(): LoopStats {
    this.#delay.disable();
    this.#gc.disconnect();
    const ms = (ns: number): number => Math.round(ns / 1e4) / 100;
    return {
      loopDelayP99Ms: ms(this.#delay.percentile(99)),
      loopDelayMaxMs: ms(this.#delay.max),
      gcCount: this.#gcCount,
      gcTotalMs: Math.round(this.#gcTotal * 100) / 100,
      gcMaxMs: Math.round(this.#gcMax * 100) / 100,
    };
  }
}

/** An HDR histogram of latencies in µs (1 µs to 60 s, 3 significant digits). */
export function histogram(): hdr.Histogram {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
}

export function percentiles(h: hdr.Histogram): Percentiles {
  const ms = (p: number): number => Math.round(h.getValueAtPercentile(p)) / 1000;
  return {
    count: h.totalCount,
    p50Ms: ms(50),
    p90Ms: ms(90),
    p99Ms: ms(99),
    p999Ms: ms(99.9),
    maxMs: Math.round(h.maxValue) / 1000,
  };
}

/**
 * `h` (µs) as percentile → ms pairs, non-decreasing: 0 is the smallest value, 100 the highest value
 * of the largest value's bucket (as every other percentile is reported). Empty: no pairs.
 */
export function compactHistogram(h: hdr.Histogram): CompactHistogram {
  if (h.totalCount === 0) return { unit: 'ms', percentiles: [] };
  return {
    unit: 'ms',
    percentiles: kPlotPercentiles.map((p): [number, number] => [
      p,
      Math.round(p === 0 ? h.minNonZeroValue : h.getValueAtPercentile(p)) / 1000,
    ]),
  };
}

function agentOf(a: Args): SimAgent {
  return new SimAgent({
    target: String(a['target']),
    tls: a['tls'] as SimAgentTls,
    agentId: String(a['agentId']),
    instanceId: String(a['instanceId']),
  });
}

export async function runLatency(a: Args): Promise<Record<string, unknown>> {
  const commandId = String(a['commandId']);
  const chunkBytes = Number(a['chunkBytes']);
  let sendAt = new Float64Array(1 << 16);
  let recording = false;
  const hists = { sse: histogram(), ws: histogram(), all: histogram() };
  let wake: (() => void) | undefined;
  const listener = (h: hdr.Histogram) => (seq: number, nowMs: number) => {
    if (recording && seq < sendAt.length && sendAt[seq]! > 0) {
      const us = Math.max(1, Math.round((nowMs - sendAt[seq]!) * 1000));
      h.recordValue(us);
      hists.all.recordValue(us);
    }
    const w = wake;
    wake = undefined;
    w?.();
  };
  /** The next subscriber event, or 20 ms. */
  const progress = (): Promise<void> =>
    new Promise((resolve) => {
      const t = setTimeout(resolve, 20);
      wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  const subs: LightSubscriber[] = [];
  for (let i = 0; i < Number(a['sse']); i++) subs.push(await SseSubscriber.open(String(a['sseUrl']), listener(hists.sse)));
  for (let i = 0; i < Number(a['ws']); i++)
    subs.push(await WsSubscriber.open(Number(a['wsPort']), String(a['wsSubscribe']), listener(hists.ws)));
  await sleep(200);
  const agent = agentOf(a);
  agent.register();
  await agent.acked;
  const data = ptyText(chunkBytes, 3);
  let seq = 0;
  const send = (): void => {
    seq++;
    if (seq >= sendAt.length) {
      const grown = new Float64Array(sendAt.length * 2);
      grown.set(sendAt);
      sendAt = grown;
    }
    sendAt[seq] = performance.now();
    agent.chunk(commandId, seq, (seq - 1) * data.length, data);
  };

  // 1. maximum rate: at most 32 chunks in flight
  const maxMs = Number(a['maxRateMs']);
  const t0 = performance.now();
  const s0 = seq;
  while (performance.now() - t0 < maxMs) {
    if (seq - minSeq(subs) >= 32) await progress();
    else send();
  }
  while (minSeq(subs) < seq && performance.now() - t0 < maxMs + 5000) await progress();
  const maxRate = (minSeq(subs) - s0) / ((performance.now() - t0) / 1000);

  // 2. half of it, paced every millisecond
  const rate = maxRate / 2;
  const warmupMs = Number(a['warmupMs']);
  const measureMs = Number(a['measureMs']);
  const monitor = new LoopMonitor();
  const start = performance.now();
  let due = 0;
  let monitoring = false;
  while (performance.now() - start < warmupMs + measureMs) {
    const elapsed = performance.now() - start;
    recording = elapsed >= warmupMs;
    if (recording && !monitoring) {
      monitoring = true;
      monitor.start();
    }
    const target = Math.floor((elapsed / 1000) * rate);
    while (due < target) {
      send();
      due++;
    }
    await sleep(1);
  }
  const last = seq;
  const client = monitoring ? monitor.stop() : null;
  while (minSeq(subs) < last && performance.now() - start < warmupMs + measureMs + 5000) await sleep(1);
  recording = false;
  agent.close();
  for (const s of subs) s.close();
  return {
    maxRate: Math.round(maxRate),
    rate: Math.round(rate),
    sse: percentiles(hists.sse),
    ws: percentiles(hists.ws),
    all: percentiles(hists.all),
    histogram: compactHistogram(hists.all),
    client,
    holes: subs.reduce((n, s) => n + s.holes, 0),
    incomplete: subs.filter((s) => s.lastSeq < last).length,
  };
}

/** The agents of `replay.fill`, kept connected until `replay.time` is done with their output. */
const replayAgents: SimAgent[] = [];

/** One agent streams `chunks` chunks of a command; resolves once a live subscriber got them all. */
export async function fillReplay(a: Args): Promise<Record<string, unknown>> {
  const commandId = String(a['commandId']);
  const chunks = Number(a['chunks']);
  const agent = agentOf(a);
  replayAgents.push(agent);
  agent.register();
  await agent.acked;
  const data = ptyText(Number(a['chunkBytes']), 5);
  // A live subscriber tells when the server holds them all.
  let got = 0;
  const live = await SseSubscriber.open(String(a['liveUrl']), (seq) => (got = seq));
  for (let seq = 1; seq <= chunks; seq++) {
    if (!agent.chunk(commandId, seq, (seq - 1) * data.length, data)) await agent.drained();
  }
  for (let i = 0; i < 600 && got < chunks; i++) await sleep(50);
  live.close();
  if (got < chunks) throw new Error(`the server delivered ${got} of ${chunks} chunks live`);
  return { chunks: got };
}

/** One replay: ms from the request to the `chunks`-th event parsed, and the bytes received. */
async function replayOnce(url: string, chunks: number): Promise<{ ms: number; bytes: number; events: number }> {
  const t0 = performance.now();
  let events = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  const sub = await SseSubscriber.open(url, () => {
    if (++events === chunks) done();
  });
  const timeout = sleep(20_000).then(() => undefined);
  await Promise.race([all, timeout]);
  const ms = performance.now() - t0;
  sub.close();
  return { ms, bytes: sub.bytes, events };
}

/**
 * New subscribers on each of `urls` in turn (the server's replay and its raw ceiling alternate,
 * so drift hits both alike), `iterations` rounds after `warmup` uncounted ones; per URL the times
 * and the bytes of the last one. Closes the agents of replay.fill.
 */
export async function timeReplay(a: Args): Promise<Record<string, unknown>> {
  const urls = a['urls'] as string[];
  const chunks = Number(a['chunks']);
  const warmup = Number(a['warmup']);
  const out = urls.map(() => ({ timesMs: [] as number[], bytes: 0 }));
  try {
    for (let i = 0; i < warmup + Number(a['iterations']); i++) {
      for (const [u, url] of urls.entries()) {
        const r = await replayOnce(url, chunks);
        if (r.events < chunks) throw new Error(`replay ${url} returned ${r.events} of ${chunks} chunks`);
        if (i >= warmup) out[u]!.timesMs.push(r.ms);
        out[u]!.bytes = r.bytes;
      }
    }
  } finally {
    for (const agent of replayAgents.splice(0)) agent.close();
  }
  return { byUrl: out };
}
