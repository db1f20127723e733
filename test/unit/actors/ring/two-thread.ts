/**
 * The two-thread ring check shared by both implementations: a worker produces thousands of
 * random-size, sequence-numbered, checksummed records while this (main) thread consumes them
 * concurrently; delivery must be byte-exact and in order.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { Worker, type TransferListItem } from 'node:worker_threads';
import type { RingConsumer } from '../../../../actors/ring/types.js';
import { fnv1a, makeRecord, type ProducerJob } from './record-gen.js';

export async function runTwoThreadStream(consumer: RingConsumer, job: ProducerJob, transferList: TransferListItem[] = []): Promise<void> {
  const worker = new Worker(new URL('./ring-producer.worker.js', import.meta.url), { workerData: job, transferList });
  const exited = once(worker, 'exit');
  let next = 0;
  let mismatch: string | undefined;
  let drains = 0;
  while (await consumer.waitReadable()) {
    drains++;
    // Vary the batch size so the consumer sometimes lags and the producer hits a full ring.
    consumer.drain(
      (record) => {
        if (mismatch !== undefined) return;
        const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
        const seq = view.getUint32(0, true);
        const body = record.subarray(8);
        const [header, expectedBody] = makeRecord(job.seed, next, job.maxBodyBytes);
        if (seq !== next) mismatch = `record ${next}: got sequence ${seq}`;
        else if (view.getUint32(4, true) !== fnv1a(body)) mismatch = `record ${next}: checksum does not match its body`;
        else if (!Buffer.from(record.subarray(0, 8)).equals(header) || !Buffer.from(body).equals(expectedBody)) {
          mismatch = `record ${next}: bytes differ`;
        }
        next++;
      },
      1 + (drains % 7) * 50,
    );
  }
  const [code] = (await exited) as [number];
  assert.equal(mismatch, undefined, mismatch);
  assert.equal(code, 0, 'producer worker exits cleanly');
  assert.equal(next, job.count, 'every record arrives');
}
