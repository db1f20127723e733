/**
 * The other side of a ring whose wake-up comes late (sab-ring.test.ts, "late wake-up"): on each
 * round it spins until the watched waiting flag is raised, then lowers it and notifies the
 * counter, as a producer does whose notify comes after the consumer took its record, until
 * one notify finds no waiter. It spins because the race it recreates is the microsecond between
 * a waiter raising its flag and registering its wait. Control slots (Int32 in `control`): [0] round armed by the test, [1] round
 * done by this worker, [2] notifies that found no waiter (the race was hit).
 */
import { workerData } from 'node:worker_threads';

interface LateNotifierJob {
  ring: SharedArrayBuffer;
  control: SharedArrayBuffer;
  flagSlot: number;
  counterSlot: number;
  rounds: number;
}

const job = workerData as LateNotifierJob;
const ctrl = new Int32Array(job.ring, 0, 32);
const control = new Int32Array(job.control);
for (let round = 1; round <= job.rounds; round++) {
  while (Atomics.load(control, 0) < round) Atomics.wait(control, 0, round - 1, 1000);
  // A notify that found the waiter registered only woke it (spuriously): it raises its flag again
  // and the next try may land in the window. Stop at the first that finds no waiter, or after 200 ms.
  const until = performance.now() + 200;
  for (;;) {
    while (Atomics.load(ctrl, job.flagSlot) === 0 && performance.now() < until);
    if (Atomics.exchange(ctrl, job.flagSlot, 0) !== 0 && Atomics.notify(ctrl, job.counterSlot) === 0) {
      Atomics.add(control, 2, 1);
      break;
    }
    if (performance.now() >= until) break;
  }
  Atomics.store(control, 1, round);
  Atomics.notify(control, 1);
}
