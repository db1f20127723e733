/** Two-thread ring test: writes `count` generated records into the ring it is given, then closes it. */
import { workerData } from 'node:worker_threads';
import { SabRingProducer } from '../../../../actors/ring/sab-ring.js';
import { PortRingProducer } from '../../../../actors/ring/port-ring.js';
import type { RingProducer } from '../../../../actors/ring/types.js';
import { makeRecord, type ProducerJob } from './record-gen.js';

const job = workerData as ProducerJob;
const producer: RingProducer =
  job.kind === 'sab' ? new SabRingProducer(job.sab!, job.wake) : new PortRingProducer(job.port!, job.capacityBytes);

for (let seq = 0; seq < job.count; seq++) {
  const parts = makeRecord(job.seed, seq, job.maxBodyBytes);
  const bytes = parts[0].byteLength + parts[1].byteLength;
  while (!producer.tryWrite(parts)) await producer.waitWritable(bytes);
}
producer.close();
