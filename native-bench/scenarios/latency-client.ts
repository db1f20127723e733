/**
 * Client-process side of the `latency` and `replay` scenarios (bench-client.ts dispatches here).
 *
 * latency: one simulated agent (in its own thread, latency-agent.worker.ts) and a few subscribers
 * (in this thread) in this process, so the time from the agent writing a chunk to a subscriber
 * parsing it is measured on one clock (timeOrigin + performance.now, checked across the threads).
 * First the batched maximum (chunks/s with a window of 32 chunks in flight), then a search for
 * the highest paced rate the path keeps up with, then half of that, each chunk sent at its own due
 * time (at most 2 per wake-up; the due times come from a pacing thread), with every chunk's
 * latency in an HDR histogram per transport; the result carries how evenly it was paced
 * (`pacing`), and the p99 at half of the batched maximum (`halfBatched`).
 *
 * replay: one agent streams `chunks` chunks of a command (replay.fill); then new subscribers ask
 * for replay=true&limit=<chunks> and, in turn, the raw ceiling's copy of the same bytes
 * (replay.time); each time is request → last replayed event parsed.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import * as hdr from 'hdr-histogram-js';
import {
  epochNow,
  kClockRound,
  kClockRounds,
  kFirstMeasured,
  kMinSeq,
  type AgentShared,
  type AgentWorkerData,
  type FromAgent,
  type Pacing,
  type ToAgent,
} from './latency-agent-protocol.js';
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
  /**
   * CPU time of every thread of this process, and the time they were runnable but waited for a
   * core (Linux schedstat: the run queue), ms per second of the window; `main*` the main thread
   * alone. A run-queue wait near the CPU time means the machine, not the code, set the tail.
   */
  sched?: { cpuMsPerS: number; runQueueMsPerS: number; mainCpuMsPerS: number; mainRunQueueMsPerS: number };
}

/** [run ns, run-queue wait ns] per thread of this process (Linux /proc schedstat), or null. */
function schedstat(): Map<string, [number, number]> | null {
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return null;
  }
  const out = new Map<string, [number, number]>();
  for (const tid of tids) {
    try {
      const [run, wait] = readFileSync(`/proc/self/task/${tid}/schedstat`, 'latin1').split(' ');
      out.set(tid, [Number(run), Number(wait)]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return out.size > 0 ? out : null;
}

/** Measures this thread's event-loop delay and GC pauses from start() to stop(). */
export class LoopMonitor {
  readonly #delay = monitorEventLoopDelay({ resolution: 1 });
  readonly #gc: PerformanceObserver;
  #gcCount = 0;
  #gcTotal = 0;
  #gcMax = 0;
  #sched0: Map<string, [number, number]> | null = null;
  #t0 = 0;

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
    this.#sched0 = schedstat();
    this.#t0 = performance.now();
  }

  stop(): LoopStats {
    this.#delay.disable();
    this.#gc.disconnect();
    const ms = (ns: number): number => Math.round(ns / 1e4) / 100;
    const stats: LoopStats = {
      loopDelayP99Ms: ms(this.#delay.percentile(99)),
      loopDelayMaxMs: ms(this.#delay.max),
      gcCount: this.#gcCount,
      gcTotalMs: Math.round(this.#gcTotal * 100) / 100,
      gcMaxMs: Math.round(this.#gcMax * 100) / 100,
    };
    const s0 = this.#sched0;
    const s1 = schedstat();
    const seconds = (performance.now() - this.#t0) / 1000;
    if (s0 !== null && s1 !== null && seconds > 0) {
      let cpu = 0;
      let wait = 0;
      for (const [tid, [run, w]] of s1) {
        const [run0, w0] = s0.get(tid) ?? [0, 0];
        cpu += run - run0;
        wait += w - w0;
      }
      const main = String(process.pid);
      const [mRun, mWait] = s1.get(main) ?? [0, 0];
      const [mRun0, mWait0] = s0.get(main) ?? [0, 0];
      const perS = (ns: number): number => Math.round(ns / 1e4 / seconds) / 100;
      stats.sched = {
        cpuMsPerS: perS(cpu),
        runQueueMsPerS: perS(wait),
        mainCpuMsPerS: perS(mRun - mRun0),
        mainRunQueueMsPerS: perS(mWait - mWait0),
      };
    }
    return stats;
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

/** The simulated agent's thread (latency-agent.worker.ts), driven by messages and shared memory. */
class AgentThread {
  readonly sendAt: Float64Array;
  readonly ctl: Int32Array;
  readonly #clock: Float64Array;
  readonly #worker: Worker;
  readonly #waiters = new Map<FromAgent['event'], (m: FromAgent) => void>();
  /** Messages no one waited for yet. */
  readonly #unclaimed: FromAgent[] = [];
  readonly #exited: Promise<void>;
  #failure: Error | undefined;
  onMeasuring: (() => void) | undefined;

  constructor(a: Args) {
    const shared: AgentShared = {
      sendAt: new SharedArrayBuffer(8 << 21),
      ctl: new SharedArrayBuffer(16),
      clock: new SharedArrayBuffer(16),
    };
    this.sendAt = new Float64Array(shared.sendAt);
    this.ctl = new Int32Array(shared.ctl);
    this.#clock = new Float64Array(shared.clock);
    const data: AgentWorkerData = {
      ...shared,
      target: String(a['target']),
      tls: a['tls'] as SimAgentTls,
      agentId: String(a['agentId']),
      instanceId: String(a['instanceId']),
      commandId: String(a['commandId']),
      chunkBytes: Number(a['chunkBytes']),
    };
    this.#worker = new Worker(new URL('./latency-agent.worker.js', import.meta.url), { workerData: data });
    this.#worker.on('message', (m: FromAgent) => {
      if (m.event === 'measuring') this.onMeasuring?.();
      else if (m.event === 'error') this.#fail(new Error(`latency agent: ${m.message}`));
      const w = this.#waiters.get(m.event);
      this.#waiters.delete(m.event);
      if (w) w(m);
      else if (m.event !== 'measuring' && m.event !== 'error') this.#unclaimed.push(m);
    });
    this.#worker.on('error', (e) => this.#fail(e));
    this.#exited = new Promise((resolve) => this.#worker.on('exit', () => resolve()));
  }

  #fail(e: Error): void {
    this.#failure ??= e;
    for (const w of this.#waiters.values()) w({ event: 'error', message: e.message });
    this.#waiters.clear();
  }

  /** The next message `event` from the agent thread. */
  next<E extends FromAgent['event']>(event: E): Promise<Extract<FromAgent, { event: E }>> {
    return new Promise((resolve, reject) => {
      if (this.#failure) return reject(this.#failure);
      const i = this.#unclaimed.findIndex((m) => m.event === event);
      if (i >= 0) return resolve(this.#unclaimed.splice(i, 1)[0] as Extract<FromAgent, { event: E }>);
      this.#waiters.set(event, (m) => {
        if (m.event === event) resolve(m as Extract<FromAgent, { event: E }>);
        else reject(this.#failure ?? new Error(`latency agent: ${m.event}`));
      });
    });
  }

  command(m: ToAgent): void {
    this.#worker.postMessage(m);
  }

  /**
   * How far the agent thread's clock is from this one's: this thread stamps, the agent thread
   * answers with its own clock at once; the offset of the round trip with the least time is
   * agent − midpoint, within ± half that round trip. Blocks this thread (a few ms, before any load).
   */
  checkClock(): ClockCheck {
    let best = { rttMs: Infinity, offsetMs: 0 };
    for (let r = 1; r <= kClockRounds; r++) {
      const t1 = epochNow();
      this.#clock[0] = t1;
      Atomics.store(this.ctl, kClockRound, 2 * r - 1);
      Atomics.notify(this.ctl, kClockRound);
      while (Atomics.load(this.ctl, kClockRound) < 2 * r) Atomics.wait(this.ctl, kClockRound, 2 * r - 1, 1000);
      const t3 = epochNow();
      const t2 = this.#clock[1]!;
      if (t3 - t1 < best.rttMs) best = { rttMs: t3 - t1, offsetMs: t2 - (t1 + t3) / 2 };
    }
    return { offsetMs: round3(best.offsetMs), boundMs: round3(best.rttMs / 2) };
  }

  async close(): Promise<void> {
    this.command({ op: 'close' });
    const t = setTimeout(() => void this.#worker.terminate(), 2000);
    await this.#exited;
    clearTimeout(t);
  }
}

/** The agent thread's clock minus this thread's, ms, and how exactly that is known (±). */
export interface ClockCheck {
  offsetMs: number;
  boundMs: number;
}

const round3 = (ms: number): number => Math.round(ms * 1000) / 1000;

export async function runLatency(a: Args): Promise<Record<string, unknown>> {
  const agent = new AgentThread(a);
  try {
    return await measureLatency(a, agent);
  } finally {
    await agent.close();
  }
}

/**
 * The search for the maximum paced rate: each probe sends at one rate for `probeMs` (after
 * kProbeWarmupMs), each chunk alone at its due time as in the measuring window. The path kept up
 * when the agent sent ≥ 97 % of what was due, the probe's chunks reached every subscriber with a
 * median latency ≤ kKeptUpP50Ms, and the last one within kKeptUpDrainMs of the probe's end: past
 * the maximum a backlog builds and both grow with it.
 */
const kProbeWarmupMs = 100;
const kKeptUpP50Ms = 5;
const kKeptUpDrainMs = 20;
/** Geometric steps of the search, then halvings of the last interval. */
const kSearchStep = 1.3;
const kSearchHalvings = 3;

export interface RateProbe {
  rate: number;
  sentRate: number;
  p50Ms: number;
  p99Ms: number;
  drainMs: number;
  keptUp: boolean;
}

/** One paced phase's outcome: its last seq, pacing, first measured seq, time for every subscriber to get the last chunk. */
interface PacedPhase {
  last: number;
  first: number;
  pacing: Pacing;
  drainMs: number;
}

async function measureLatency(a: Args, agent: AgentThread): Promise<Record<string, unknown>> {
  const { sendAt, ctl } = agent;
  const origin = performance.timeOrigin;
  const subs: LightSubscriber[] = [];
  const nSubs = Number(a['sse']) + Number(a['ws']);
  /** Where the current phase records latencies (null: nowhere). */
  let rec: { sse: hdr.Histogram; ws: hdr.Histogram } | null = null;
  /** Subscribers that have parsed each seq: the lowest seq is looked up only when the last of them got one. */
  const got = new Uint8Array(sendAt.length);
  let min = 0;
  const listener = (kind: 'sse' | 'ws') => (seq: number, nowMs: number) => {
    const first = Atomics.load(ctl, kFirstMeasured);
    if (rec !== null && first > 0 && seq >= first && sendAt[seq]! > 0)
      rec[kind].recordValue(Math.max(1, Math.round((origin + nowMs - sendAt[seq]!) * 1000)));
    if (seq > min && seq < got.length && ++got[seq]! >= nSubs) {
      const m = minSeq(subs);
      if (m > min) {
        min = m;
        Atomics.store(ctl, kMinSeq, m);
        Atomics.notify(ctl, kMinSeq);
      }
    }
  };
  await agent.next('ready');
  const clock = agent.checkClock();
  for (let i = 0; i < Number(a['sse']); i++) subs.push(await SseSubscriber.open(String(a['sseUrl']), listener('sse')));
  for (let i = 0; i < Number(a['ws']); i++)
    subs.push(await WsSubscriber.open(Number(a['wsPort']), String(a['wsSubscribe']), listener('ws')));
  await sleep(200);
  await agent.next('registered');

  /** Paced at `rate` for warmupMs + measureMs, latencies of the measured part into `into`; waits until every subscriber has it all. */
  const paced = async (rate: number, warmupMs: number, measureMs: number, into: typeof rec): Promise<PacedPhase> => {
    rec = into;
    agent.command({ op: 'paced', rate, warmupMs, measureMs });
    const { last, pacing } = await agent.next('paced');
    const first = Atomics.load(ctl, kFirstMeasured);
    const t0 = performance.now();
    while (minSeq(subs) < last && performance.now() - t0 < 5000) await sleep(1);
    const drainMs = performance.now() - t0;
    Atomics.store(ctl, kFirstMeasured, 0);
    rec = null;
    return { last, first, pacing, drainMs };
  };
  const probeMs = Number(a['probeMs']);
  const probe = async (rate: number): Promise<RateProbe> => {
    const h = { sse: histogram(), ws: histogram() };
    const r = await paced(rate, kProbeWarmupMs, probeMs, h);
    const all = histogram();
    all.add(h.sse);
    all.add(h.ws);
    const p = percentiles(all);
    const sentRate = r.first > 0 ? (r.last - r.first + 1) / (probeMs / 1000) : 0;
    const keptUp = sentRate >= 0.97 * rate && p.p50Ms <= kKeptUpP50Ms && r.drainMs <= kKeptUpDrainMs;
    return { rate: Math.round(rate), sentRate: Math.round(sentRate), p50Ms: p.p50Ms, p99Ms: p.p99Ms, drainMs: round3(r.drainMs), keptUp };
  };

  // 1. The batched maximum: at most 32 chunks in flight (the agent thread keeps the window against
  //    kMinSeq), so gRPC, TLS and the sockets carry several chunks per write.
  agent.command({ op: 'max', ms: Number(a['maxRateMs']) });
  const { maxRate: batchedMax } = await agent.next('max');

  // 2. The maximum paced rate, each chunk alone as in the measuring window: up in steps from half
  //    the batched maximum until the path falls behind, then halving the interval.
  const probes: RateProbe[] = [];
  const keptUpAt = async (rate: number): Promise<boolean> => {
    const p = await probe(rate);
    probes.push(p);
    return p.keptUp;
  };
  let lo = 0;
  let hi = Infinity;
  let r = batchedMax / 2;
  if (await keptUpAt(r)) {
    lo = r;
    while (hi === Infinity && r < batchedMax * 1.5) {
      r *= kSearchStep;
      if (await keptUpAt(r)) lo = r;
      else hi = r;
    }
  } else {
    hi = r;
    while (lo === 0 && r > 50) {
      r /= kSearchStep;
      if (await keptUpAt(r)) lo = r;
      else hi = r;
    }
  }
  for (let i = 0; i < kSearchHalvings && lo > 0 && hi !== Infinity; i++) {
    const mid = Math.sqrt(lo * hi);
    if (await keptUpAt(mid)) lo = mid;
    else hi = mid;
  }
  const maxRate = lo > 0 ? lo : batchedMax / 2;

  // 3. Half of it, measured; the server is told when the window starts and ends (its loop stats).
  const rate = maxRate / 2;
  const warmupMs = Number(a['warmupMs']);
  const measureMs = Number(a['measureMs']);
  const monitor = new LoopMonitor();
  let monitoring = false;
  agent.onMeasuring = () => {
    monitoring = true;
    monitor.start();
    process.send?.({ event: 'latency.measuring' });
  };
  const hists = { sse: histogram(), ws: histogram() };
  const measured = await paced(rate, warmupMs, measureMs, hists);
  process.send?.({ event: 'latency.measured' });
  agent.onMeasuring = undefined;
  const client = monitoring ? monitor.stop() : null;
  const all = histogram();
  all.add(hists.sse);
  all.add(hists.ws);

  // 4. For comparison with figures before the paced maximum: half of the batched maximum.
  const halfBatchedMs = Number(a['halfBatchedMs']);
  let last = measured.last;
  let halfBatched: Record<string, unknown> | null = null;
  if (halfBatchedMs > 0) {
    const old = { sse: histogram(), ws: histogram() };
    const oldPhase = await paced(batchedMax / 2, kProbeWarmupMs, halfBatchedMs, old);
    const oldAll = histogram();
    oldAll.add(old.sse);
    oldAll.add(old.ws);
    last = oldPhase.last;
    halfBatched = { rate: Math.round(batchedMax / 2), ...percentiles(oldAll), pacing: oldPhase.pacing };
  }
  for (const s of subs) s.close();
  return {
    maxRate: Math.round(maxRate),
    rate: Math.round(rate),
    batchedMaxRate: Math.round(batchedMax),
    search: probes,
    sse: percentiles(hists.sse),
    ws: percentiles(hists.ws),
    all: percentiles(all),
    histogram: compactHistogram(all),
    halfBatched,
    client,
    pacing: measured.pacing,
    clock,
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
