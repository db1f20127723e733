import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { loadBinding } from '../../../../src/hypervisor/libvirt/binding.js';

test('the binding refuses to load in a worker thread, and the main thread keeps working', async () => {
  const { Hypervisor } = await loadBinding();
  const conn = new Hypervisor({ uri: 'test:///default' });
  await conn.connectOpen();
  const bindingUrl = new URL('../../../../src/hypervisor/libvirt/binding.js', import.meta.url).href;
  const worker = new Worker(
    `import(${JSON.stringify(bindingUrl)}).then((m) => m.loadBinding()).then(
       () => require('node:worker_threads').parentPort.postMessage('loaded'),
       (e) => require('node:worker_threads').parentPort.postMessage('refused: ' + e.message));`,
    { eval: true },
  );
  const answer = await new Promise<string>((resolve, reject) => {
    worker.once('message', (m: string) => resolve(m));
    worker.once('error', reject);
  });
  await worker.terminate();
  assert.match(answer, /^refused: .*main thread/);
  // Had the worker loaded the addon, this list would abort the process.
  const names = await Promise.all((await conn.connectListAllDomains()).map((d) => d.getName()));
  assert.ok(names.includes('test'));
  await conn.connectClose();
});
