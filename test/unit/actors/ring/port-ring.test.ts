import { describe, test } from 'node:test';
import { MessageChannel } from 'node:worker_threads';
import { PortRingConsumer, createPortRingPair } from '../../../../actors/ring/port-ring.js';
import { ringContract } from './ring-contract.js';
import { runTwoThreadStream } from './two-thread.js';

ringContract('MessagePort ring', (capacityBytes) => createPortRingPair(capacityBytes));

void describe('MessagePort ring', () => {
  void test('two threads: a worker producer and a main-thread consumer stream 5,000 records byte-exact', async () => {
    const capacityBytes = 64 * 1024;
    const { port1, port2 } = new MessageChannel();
    await runTwoThreadStream(
      new PortRingConsumer(port1),
      { kind: 'port', port: port2, capacityBytes, seed: 0x9047, count: 5000, maxBodyBytes: 3000 },
      [port2],
    );
  });
});
