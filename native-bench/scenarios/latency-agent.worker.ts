/**
 * The simulated agent of the `latency` scenario, in its own thread of the bench client process
 * (latency-client.ts starts it), so that its sending is not delayed by the subscribers' parsing
 * and the subscribers' receipts are not delayed by its sending: a chunk is sent at its own due
 * time, not in a burst after a late timer.
 *
 * Shared memory with the subscribers' thread (see `AgentShared`):
 * - `sendAt[seq]`: when chunk `seq` was handed to the gRPC stream, in ms on the cross-thread clock
 *   `performance.timeOrigin + performance.now()` (epochNow);
 * - `ctl[kMinSeq]`: the lowest seq every subscriber has (written and notified by the subscribers'
 *   thread) — the max-rate phase keeps at most 32 chunks in flight against it;
 * - `ctl[kFirstMeasured]`: the first seq of the measuring window (0 before it).
 *
 * Commands (postMessage): `max` {ms} → {maxRate, seq}; `paced` {rate, warmupMs, measureMs} →
 * event `measuring` when the window starts, then {last, pacing}; `close`.
 */
import { performance } from 'node:perf_hooks';
import { setImmediate as turn } from 'node:timers/promises';
import { parentPort, Worker, workerData } from 'node:worker_threads';
import {
  epochNow,
  kBurstLimit,
  kClockRound,
  kClockRounds,
  kFirstMeasured,
  kMinSeq,
  kTick,
  kWindow,
  type AgentWorkerData,
  type FromAgent,
  type ToAgent,
  type ToTicker,
} from './latency-agent-protocol.js';
import { ptyText, SimAgent } from './sim-agent.js';

/** Atomics.waitAsync (ES2024; missing from the ES2023 lib this project compiles against). The message port keeps the thread alive while it waits. */
type WaitAsyncResult = { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (
  Atomics as unknown as { waitAsync(ta: Int32Array, index: number, value: number, timeoutMs?: number): WaitAsyncResult }
).waitAsync.bind(Atomics);

function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const round3 = (ms: number): number => Math.round(ms * 1000) / 1000;

async function main(): Promise<void> {
  const port = parentPort!;
  const d = workerData as AgentWorkerData;
  const post = (m: FromAgent): void => port.postMessage(m);
  const sendAt = new Float64Array(d.sendAt);
  const ctl = new Int32Array(d.ctl);
  const clock = new Float64Array(d.clock);

  // Clock check: answer each stamp of the other thread with this thread's clock at once.
  post({ event: 'ready' });
  for (let r = 1; r <= kClockRounds; r++) {
    while (Atomics.load(ctl, kClockRound) < 2 * r - 1) Atomics.wait(ctl, kClockRound, 2 * r - 2, 1000);
    clock[1] = epochNow();
    Atomics.store(ctl, kClockRound, 2 * r);
    Atomics.notify(ctl, kClockRound);
  }

  const ticker = new Worker(new URL('./latency-ticker.worker.js', import.meta.url), { workerData: d.ctl });
  const agent = new SimAgent({ target: d.target, tls: d.tls, agentId: d.agentId, instanceId: d.instanceId });
  agent.register();
  await agent.acked;
  post({ event: 'registered' });
  const data = ptyText(d.chunkBytes, 3);
  let seq = 0;
  const send = (): void => {
    seq++;
    sendAt[seq] = epochNow();
    agent.chunk(d.commandId, seq, (seq - 1) * data.length, data);
  };
  const room = (): boolean => seq + 1 < sendAt.length;

  const runMax = async (ms: number): Promise<void> => {
    const t0 = performance.now();
    const s0 = seq;
    while (performance.now() - t0 < ms && room()) {
      const min = Atomics.load(ctl, kMinSeq);
      if (seq - min >= kWindow) {
        const w = waitAsync(ctl, kMinSeq, min, 20);
        if (w.async) await w.value;
      } else send();
    }
    for (;;) {
      const min = Atomics.load(ctl, kMinSeq);
      if (min >= seq || performance.now() - t0 > ms + 5000) break;
      const w = waitAsync(ctl, kMinSeq, min, 20);
      if (w.async) await w.value;
    }
    const maxRate = (Atomics.load(ctl, kMinSeq) - s0) / ((performance.now() - t0) / 1000);
    post({ event: 'max', maxRate, seq });
  };

  const runPaced = async (rate: number, warmupMs: number, measureMs: number): Promise<void> => {
    const interval = 1000 / rate;
    const bursts: number[] = [];
    const late: number[] = [];
    const t0 = performance.now();
    let k = 0; // chunks of this phase sent; chunk k is due at t0 + k * interval
    let measuring = false;
    let tick = Atomics.load(ctl, kTick);
    ticker.postMessage({
      op: 'run',
      t0: performance.timeOrigin + t0,
      intervalMs: interval,
      untilMs: performance.timeOrigin + t0 + warmupMs + measureMs + interval,
    } satisfies ToTicker);
    for (;;) {
      const elapsed = performance.now() - t0;
      if (elapsed >= warmupMs + measureMs || !room()) break;
      if (!measuring && elapsed >= warmupMs) {
        measuring = true;
        Atomics.store(ctl, kFirstMeasured, seq + 1);
        post({ event: 'measuring' });
      }
      let burst = 0;
      while (burst < kBurstLimit && k * interval <= performance.now() - t0) {
        if (measuring) late.push(performance.now() - t0 - k * interval);
        send();
        k++;
        burst++;
      }
      if (measuring && burst > 0) bursts.push(burst);
      // Until the next tick of the pacing clock (its own thread: latency-ticker.worker.ts): the
      // event loop stays free for the socket meanwhile.
      if (k * interval > performance.now() - t0) {
        const w = waitAsync(ctl, kTick, tick);
        if (w.async) await w.value;
      } else await turn();
      tick = Atomics.load(ctl, kTick);
    }
    bursts.sort((a, b) => a - b);
    late.sort((a, b) => a - b);
    post({
      event: 'paced',
      last: seq,
      pacing: {
        wakeUps: bursts.length,
        maxBurst: bursts.at(-1) ?? 0,
        p99Burst: percentile(bursts, 99),
        multiBursts: bursts.filter((b) => b > 1).length,
        lateP50Ms: round3(percentile(late, 50)),
        lateP99Ms: round3(percentile(late, 99)),
        lateMaxMs: round3(late.at(-1) ?? 0),
      },
    });
  };

  port.on('message', (m: ToAgent) => {
    const fail = (e: unknown): void => post({ event: 'error', message: e instanceof Error ? e.message : String(e) });
    if (m.op === 'max') runMax(m.ms).catch(fail);
    else if (m.op === 'paced') runPaced(m.rate, m.warmupMs, m.measureMs).catch(fail);
    else {
      agent.close();
      ticker.postMessage({ op: 'close' } satisfies ToTicker);
      port.close();
    }
  });
}

await main();
