/**
 * withRetriedReads: background reads ride out HYPERVISOR_UNAVAILABLE within their window; an open
 * circuit (a Retry-After beyond the window), other errors and writes fail at once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import type { DomainInfo, HypervisorPort } from '../../../src/hypervisor/port.js';
import { withRetriedReads } from '../../../src/hypervisor/retried-reads.js';

const unavailable = (retryAfterSeconds: number): SvcError =>
  new SvcError('HYPERVISOR_UNAVAILABLE', 'hypervisor test:///default unavailable: get vm took longer than 2000 ms', {
    host: 'test:///default',
    retryAfterSeconds,
  });

/** A port whose get and startDomain fail with the queued errors first, then answer; counts calls. */
class FlakyPort {
  calls = { get: 0, startDomain: 0 };
  readonly #errors: Error[];
  constructor(errors: Error[]) {
    this.#errors = errors;
  }
  get(name: string): Promise<DomainInfo | null> {
    this.calls.get++;
    return this.#answer(name);
  }
  startDomain(name: string): Promise<DomainInfo> {
    this.calls.startDomain++;
    return this.#answer(name);
  }
  #answer(name: string): Promise<DomainInfo> {
    const err = this.#errors.shift();
    return err === undefined ? Promise.resolve({ name } as DomainInfo) : Promise.reject(err);
  }
}

const port = (p: FlakyPort, withinMs = 5000): HypervisorPort => withRetriedReads(p as unknown as HypervisorPort, { withinMs });

describe('withRetriedReads', () => {
  // The waits between tries are unref'd timers (a server keeps the loop alive); so does this.
  let keepAlive: NodeJS.Timeout;
  before(() => (keepAlive = setInterval(() => undefined, 1000)));
  after(() => clearInterval(keepAlive));

  test('a read that fails with HYPERVISOR_UNAVAILABLE is asked again after its Retry-After', async () => {
    const p = new FlakyPort([unavailable(0.05), unavailable(0.05)]);
    const t0 = Date.now();
    assert.equal((await port(p).get('vm-a'))?.name, 'vm-a');
    assert.equal(p.calls.get, 3);
    assert.ok(Date.now() - t0 >= 90, 'waited the Retry-After between tries');
  });

  test('an open circuit (Retry-After beyond the window) fails at once', async () => {
    const p = new FlakyPort([unavailable(30)]);
    await assert.rejects(port(p, 5000).get('vm-a'), (err: unknown) => err instanceof SvcError && err.code === 'HYPERVISOR_UNAVAILABLE');
    assert.equal(p.calls.get, 1);
  });

  test('tries stop once the window has passed; the last error is the answer', async () => {
    const p = new FlakyPort(Array.from({ length: 50 }, () => unavailable(0.05)));
    await assert.rejects(port(p, 200).get('vm-a'), /took longer than 2000 ms/);
    assert.ok(p.calls.get >= 3 && p.calls.get <= 6, `about 200 ms / 50 ms tries, got ${p.calls.get}`);
  });

  test('other errors and every write fail at once', async () => {
    const notFound = new FlakyPort([new SvcError('VM_NOT_FOUND', 'no such VM')]);
    await assert.rejects(port(notFound).get('vm-a'), /no such VM/);
    assert.equal(notFound.calls.get, 1);
    const write = new FlakyPort([unavailable(0.01)]);
    await assert.rejects(port(write).startDomain('vm-a'), /unavailable/);
    assert.equal(write.calls.startDomain, 1, 'a write may have happened: never repeated');
  });

  test('an abort ends the wait between tries', async () => {
    const p = new FlakyPort([unavailable(10)]);
    const ac = new AbortController();
    const pending = port(p, 60_000).get('vm-a', { signal: ac.signal });
    setTimeout(() => ac.abort(new Error('operation cancelled')), 20);
    await assert.rejects(pending, /operation cancelled/);
  });
});
