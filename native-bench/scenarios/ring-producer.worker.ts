/**
 * Producer thread of the `ring` scenario: on each `run` command it writes stamped 4 KiB records
 * for `durationMs`, into the SAB ring (mode sab) or as postMessage (clone: one reused buffer,
 * copied by structured clone; transfer: a fresh buffer per record, moved), then reports how many
 * it wrote and their checksum. postMessage output is flow-controlled by the consumer's acks.
 */
import { parentPort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { SabRingProducer } from '../../actors/ring/sab-ring.js';
import { foldChecksum, RECORD_BYTES, WINDOW_RECORDS, stampRecord, tailWord } from './ring-protocol.js';
import type { FromProducer, ProducerMode, ToProducer } from './ring-protocol.js';

const port = parentPort!;
const send = (m: FromProducer): void => port.postMessage(m);

let inFlight = 0;
let onCredit: (() => void) | undefined;

interface Produced {
  records: number;
  checksum: number;
}

async function produceSab(sab: SharedArrayBuffer, durationMs: number): Promise<Produced> {
  const producer = new SabRingProducer(sab);
  const rec = new Uint8Array(RECORD_BYTES).fill(0xa5);
  const endMs = performance.now() + durationMs;
  let seq = 0;
  let checksum = 0;
  for (;;) {
    // reading the clock every 64 records keeps it out of the per-record cost
    if ((seq & 63) === 0 && performance.now() >= endMs) break;
    stampRecord(rec, seq);
    if (producer.tryWrite(rec)) {
      checksum = foldChecksum(checksum, seq, tailWord(seq));
      seq++;
    } else {
      await producer.waitWritable(RECORD_BYTES);
    }
  }
  producer.close();
  return { records: seq, checksum };
}

async function producePosted(mode: 'clone' | 'transfer', durationMs: number): Promise<Produced> {
  const reused = new Uint8Array(RECORD_BYTES).fill(0xa5);
  const endMs = performance.now() + durationMs;
  let seq = 0;
  let checksum = 0;
  inFlight = 0;
  for (;;) {
    if ((seq & 63) === 0 && performance.now() >= endMs) break;
    if (inFlight >= WINDOW_RECORDS) {
      await new Promise<void>((resolve) => (onCredit = resolve));
      continue;
    }
    const rec = mode === 'clone' ? reused : new Uint8Array(RECORD_BYTES);
    stampRecord(rec, seq);
    if (mode === 'clone') port.postMessage(rec);
    else port.postMessage(rec, [rec.buffer]);
    inFlight++;
    checksum = foldChecksum(checksum, seq, tailWord(seq));
    seq++;
  }
  return { records: seq, checksum };
}

async function run(mode: ProducerMode, durationMs: number, sab: SharedArrayBuffer | null): Promise<void> {
  const produced = mode === 'sab' ? await produceSab(sab!, durationMs) : await producePosted(mode, durationMs);
  send({ type: 'done', mode, ...produced });
}

port.on('message', (m: ToProducer) => {
  if (m.type === 'ack') {
    inFlight -= m.records;
    const wake = onCredit;
    onCredit = undefined;
    wake?.();
    return;
  }
  run(m.mode, m.durationMs, m.sab).catch((err: unknown) =>
    send({ type: 'error', message: err instanceof Error ? err.message : String(err) }),
  );
});
send({ type: 'ready' });
