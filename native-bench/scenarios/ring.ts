/**
 * Scenario `ring`: how fast 4 KiB records (PTY chunks) cross from a worker to the main thread
 * through the SAB ring (actors/ring/sab-ring.ts), against postMessage of the same records.
 *
 * value   = SAB ring throughput, MB/s (10^6 bytes): a worker SabRingProducer writes, the main
 *           thread's SabRingConsumer drains, copying each record out of shared memory into a
 *           reused buffer (what the main thread does before uWS sends it: no allocation per
 *           record), and awaits waitReadable when empty (it never blocks).
 * ceiling = postMessage(u8) with structured clone, same records, same thread pair, bounded by
 *           the same bytes in flight (credits acked every 32 records).
 * extras  = `slice`: the ring again, the consumer allocating an owned copy per record
 *           (`slice()`, as postMessage hands out one); `transfer`: postMessage with the buffer
 *           transferred; their ratios to the ceiling; record counts; `lost`.
 *
 * The modes alternate in rounds of about a second (after an uncounted warm-up), so drift on
 * shared cores hits all of them alike. Every record is checked on arrival (number in order,
 * stamp intact) and both sides keep a running checksum; any loss or damage is a problem.
 */
import { Worker } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { SabRingConsumer, allocateSabRing } from '../../actors/ring/sab-ring.js';
import type { BenchScenario } from '../types.js';
import { foldChecksum, ACK_EVERY_RECORDS, RECORD_BYTES, RING_BYTES, readU32, tailWord } from './ring-protocol.js';
import type { FromProducer, ToProducer } from './ring-protocol.js';

/** Checks each record on arrival: number in sequence, tail stamp matching, running checksum. */
class Verifier {
  records = 0;
  corrupt = 0;
  checksum = 0;
  #expected = 0;

  check(rec: Uint8Array): void {
    const head = readU32(rec, 0);
    const tail = readU32(rec, rec.length - 4);
    if (rec.length !== RECORD_BYTES || head !== this.#expected || tail !== tailWord(head)) this.corrupt++;
    this.#expected = head + 1;
    this.records++;
    this.checksum = foldChecksum(this.checksum, head, tail);
  }
}

type Done = Extract<FromProducer, { type: 'done' }>;

/** `p`, or a rejection with the signal's reason once it aborts (the listener is removed either way). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** The producer worker, with one phase (run command → done report) in flight at a time. */
class Producer {
  readonly #worker = new Worker(new URL('./ring-producer.worker.js', import.meta.url));
  readonly #failed = new AbortController();
  #onRecord: ((rec: Uint8Array) => void) | undefined;
  #onDone: ((d: Done) => void) | undefined;
  readonly ready: Promise<void>;

  constructor() {
    let markReady: () => void = () => undefined;
    this.ready = new Promise((resolve) => (markReady = resolve));
    this.#worker.on('message', (m: Uint8Array | FromProducer) => {
      if (m instanceof Uint8Array) this.#onRecord?.(m);
      else if (m.type === 'ready') markReady();
      else if (m.type === 'done') this.#onDone?.(m);
      else this.#failed.abort(new Error(`producer worker: ${m.message}`));
    });
    this.#worker.on('error', (err) => this.#failed.abort(err));
    this.#worker.on('exit', (code) => this.#failed.abort(new Error(`producer worker exited with code ${code}`)));
  }

  /** Aborted when the worker fails or `outer` aborts. */
  signal(outer: AbortSignal): AbortSignal {
    return AbortSignal.any([outer, this.#failed.signal]);
  }

  /** Starts a phase; resolves with the worker's report. Records go to `onRecord` (postMessage modes). */
  start(cmd: ToProducer & { type: 'run' }, signal: AbortSignal, onRecord?: (rec: Uint8Array) => void): Promise<Done> {
    const done = untilAborted(new Promise<Done>((resolve) => (this.#onDone = resolve)), signal);
    // the consumer loop may be what notices a failure first; this copy keeps the rejection handled
    done.catch(() => undefined);
    this.#onRecord = onRecord;
    this.#worker.postMessage(cmd);
    return done;
  }

  post(m: ToProducer): void {
    this.#worker.postMessage(m);
  }

  async stop(): Promise<void> {
    this.#worker.removeAllListeners('exit');
    await this.#worker.terminate();
  }
}

interface Tally {
  bytes: number;
  elapsedMs: number;
  produced: number;
  consumed: number;
  corrupt: number;
  badChecksums: number;
}

async function phaseSab(p: Producer, copy: 'reuse' | 'slice', durationMs: number, signal: AbortSignal): Promise<Omit<Tally, 'bytes'>> {
  const sab = allocateSabRing(RING_BYTES);
  const consumer = new SabRingConsumer(sab);
  const v = new Verifier();
  const out = new Uint8Array(RECORD_BYTES);
  const onRecord =
    copy === 'slice'
      ? (rec: Uint8Array): void => v.check(rec.slice())
      : (rec: Uint8Array): void => {
          out.set(rec);
          v.check(out.length === rec.length ? out : out.subarray(0, rec.length));
        };
  const started = performance.now();
  const done = p.start({ type: 'run', mode: 'sab', durationMs, sab }, signal);
  for (;;) {
    consumer.drain(onRecord);
    if (!(await consumer.waitReadable(signal))) break;
  }
  const elapsedMs = performance.now() - started;
  const report = await done;
  return tallyOf(v, report, elapsedMs);
}

async function phasePosted(
  p: Producer,
  mode: 'clone' | 'transfer',
  durationMs: number,
  signal: AbortSignal,
): Promise<Omit<Tally, 'bytes'>> {
  const v = new Verifier();
  let unacked = 0;
  const onRecord = (rec: Uint8Array): void => {
    v.check(rec);
    if (++unacked === ACK_EVERY_RECORDS) {
      p.post({ type: 'ack', records: unacked });
      unacked = 0;
    }
  };
  const started = performance.now();
  // the report is posted after the last record on the same port, so it arrives after all of them
  const report = await p.start({ type: 'run', mode, durationMs, sab: null }, signal, onRecord);
  return tallyOf(v, report, performance.now() - started);
}

function tallyOf(v: Verifier, report: Done, elapsedMs: number): Omit<Tally, 'bytes'> {
  return {
    elapsedMs,
    produced: report.records,
    consumed: v.records,
    corrupt: v.corrupt,
    badChecksums: report.checksum === v.checksum ? 0 : 1,
  };
}

/** What one phase measures: the ring with either consumer copy, or postMessage clone / transfer. */
type Phase = 'ring' | 'slice' | 'clone' | 'transfer';
/** Phase lengths within a round, as shares of it. */
const PHASE_SHARES: Readonly<Record<Phase, number>> = { ring: 0.3, clone: 0.3, slice: 0.2, transfer: 0.2 };
const WARMUP_MS = 150;

function mbPerSecond(t: Tally): number {
  return t.bytes / 1e6 / (t.elapsedMs / 1000);
}

export const ring: BenchScenario = {
  name: 'ring',
  description: 'SAB ring vs postMessage clone: 4 KiB records from a worker to the main thread, consumer copies each',
  unit: 'MB/s',
  target: { ratioAtLeast: 1 },
  async run({ seconds, signal: outer }) {
    const producer = new Producer();
    try {
      const signal = producer.signal(outer);
      await untilAborted(producer.ready, signal);
      const modes: Phase[] = ['ring', 'clone', 'slice', 'transfer'];
      const measure = (mode: Phase, ms: number): Promise<Omit<Tally, 'bytes'>> =>
        mode === 'ring' || mode === 'slice'
          ? phaseSab(producer, mode === 'ring' ? 'reuse' : 'slice', ms, signal)
          : phasePosted(producer, mode, ms, signal);
      for (const mode of modes) await measure(mode, WARMUP_MS);

      const tallies = new Map<Phase, Tally>(
        modes.map((m) => [m, { bytes: 0, elapsedMs: 0, produced: 0, consumed: 0, corrupt: 0, badChecksums: 0 }]),
      );
      const rounds = Math.max(1, Math.round(seconds));
      for (let r = 0; r < rounds; r++) {
        // rotate the order each round so no mode always runs first after a pause
        for (let i = 0; i < modes.length; i++) {
          const mode = modes[(i + r) % modes.length]!;
          const got = await measure(mode, ((seconds * 1000) / rounds) * PHASE_SHARES[mode]);
          const t = tallies.get(mode)!;
          t.elapsedMs += got.elapsedMs;
          t.produced += got.produced;
          t.consumed += got.consumed;
          t.bytes += got.consumed * RECORD_BYTES;
          t.corrupt += got.corrupt;
          t.badChecksums += got.badChecksums;
        }
      }

      const problems: string[] = [];
      let lost = 0;
      for (const [mode, t] of tallies) {
        lost += t.produced - t.consumed;
        if (t.produced !== t.consumed) problems.push(`${mode}: ${t.produced} records written, ${t.consumed} arrived`);
        if (t.corrupt > 0) problems.push(`${mode}: ${t.corrupt} records out of order or damaged`);
        if (t.badChecksums > 0) problems.push(`${mode}: checksum mismatch in ${t.badChecksums} phases`);
      }
      const ceiling = mbPerSecond(tallies.get('clone')!);
      const slice = mbPerSecond(tallies.get('slice')!);
      const transfer = mbPerSecond(tallies.get('transfer')!);
      const round = (x: number, digits: number): number => Math.round(x * 10 ** digits) / 10 ** digits;
      return {
        value: mbPerSecond(tallies.get('ring')!),
        ceiling,
        problems,
        extra: {
          mode: 'worker-to-main',
          recordBytes: RECORD_BYTES,
          ringBytes: RING_BYTES,
          records: tallies.get('ring')!.consumed,
          lost,
          ceilingMode: 'postMessage clone',
          cloneRecords: tallies.get('clone')!.consumed,
          slice: round(slice, 2),
          sliceRatio: round(slice / ceiling, 3),
          sliceRecords: tallies.get('slice')!.consumed,
          transfer: round(transfer, 2),
          transferRatio: round(transfer / ceiling, 3),
          transferRecords: tallies.get('transfer')!.consumed,
          rounds,
          notes: `ring consumer copies each record into a reused buffer (slice: a fresh copy each); postMessage bounded to ${RING_BYTES} bytes in flight, acked every ${ACK_EVERY_RECORDS} records`,
        },
      };
    } finally {
      await producer.stop();
    }
  },
};
