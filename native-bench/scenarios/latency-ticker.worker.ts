/**
 * The pacing clock of the `latency` scenario's agent thread (latency-agent.worker.ts starts it):
 * ticks at given times on the cross-thread clock (epochNow) by sleeping on a futex between them
 * (`Atomics.wait`, sub-ms exact, no CPU while asleep) and notifying `ctl[kTick]`.
 *
 * Why a thread of its own: the agent thread must keep its event loop free for its socket (TLS
 * writes, HTTP/2 window updates), and `Atomics.waitAsync` cannot time a sub-ms sleep there — its
 * timeout resolves at once below 1 ms (measured: 157,546 "waits" of 0.3 ms in 300 ms, a core
 * busy), so pacing chunks less than 1 ms apart with it spun the agent thread and took a core from
 * the path being measured. Blocking the agent thread on `Atomics.wait` instead held its socket's
 * I/O back (p50 0.3 → 1-6 ms). Here the agent waits on `kTick` with a plain waitAsync (woken by
 * the notify) and its loop stays responsive.
 *
 * Messages: {op: 'run', t0, intervalMs, untilMs} (epochNow ms: tick k at t0 + k × intervalMs
 * while before untilMs; the thread is blocked until then, so a run is never longer than the
 * phase it paces); {op: 'close'} ends the thread after the current run.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { epochNow, kTick, type ToTicker } from './latency-agent-protocol.js';

const ctl = new Int32Array(workerData as SharedArrayBuffer);
const port = parentPort!;
let pending: ToTicker | undefined;
let wake: (() => void) | undefined;
port.on('message', (m: ToTicker) => {
  pending = m;
  wake?.();
});

/** Ticks from t0 until untilMs. */
function run(t0: number, intervalMs: number, untilMs: number): void {
  for (let k = 1; ; k++) {
    const due = t0 + k * intervalMs;
    if (due >= untilMs) return;
    for (;;) {
      const wait = due - epochNow();
      if (wait <= 0) break;
      // kTick changes only here: the wait times out (a sleep).
      Atomics.wait(ctl, kTick, Atomics.load(ctl, kTick), wait);
    }
    Atomics.add(ctl, kTick, 1);
    Atomics.notify(ctl, kTick);
  }
}

for (;;) {
  while (pending === undefined) await new Promise<void>((resolve) => (wake = resolve));
  const m = pending;
  pending = undefined;
  if (m.op === 'close') break;
  run(m.t0, m.intervalMs, m.untilMs);
  // Messages that arrived during the run are delivered on this turn.
  await new Promise((resolve) => setImmediate(resolve));
}
port.close();
