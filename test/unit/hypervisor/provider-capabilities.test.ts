/**
 * What each provider advertises (src/hypervisor/provider-capabilities.ts): the in-process test
 * driver checkpoints and pools; qemu only with a consume URL; remote hosts and other drivers
 * nothing; snapshot and fork nowhere; withholding removes, never adds; a refusal names the code.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { ProviderCapabilities, capabilitiesOfHost } from '../../../src/hypervisor/provider-capabilities.js';

const open = { guestConsumeUrl: null, withheld: [] } as const;
const caps = (host: string, o: Parameters<typeof capabilitiesOfHost>[2] = open) => capabilitiesOfHost(host, 0, o).capabilities;

describe('provider capabilities', () => {
  test('by provider', () => {
    assert.deepEqual(caps('test:///default'), { snapshot: false, checkpoint: true, fork: false, warm_pool: true });
    assert.deepEqual(caps('qemu:///system'), { snapshot: false, checkpoint: false, fork: false, warm_pool: false });
    assert.deepEqual(caps('qemu:///system', { guestConsumeUrl: 'https://h/consume', withheld: [] }), {
      snapshot: false,
      checkpoint: true,
      fork: false,
      warm_pool: true,
    });
    assert.equal(caps('qemu+ssh://host/system', { guestConsumeUrl: 'https://h/consume', withheld: [] }).checkpoint, false);
    assert.equal(caps('lxc:///').checkpoint, false);
    assert.match(capabilitiesOfHost('qemu:///system', 0, open).reasons.checkpoint ?? '', /SVC_BOOTSTRAP_CONSUME_URL/);
  });

  test('withholding removes what is there and takes warm pools with checkpoints', () => {
    assert.deepEqual(caps('test:///default', { guestConsumeUrl: null, withheld: ['warm_pool'] }), {
      snapshot: false,
      checkpoint: true,
      fork: false,
      warm_pool: false,
    });
    assert.deepEqual(caps('test:///default', { guestConsumeUrl: null, withheld: ['checkpoint', 'snapshot'] }), {
      snapshot: false,
      checkpoint: false,
      fork: false,
      warm_pool: false,
    });
  });

  test('require refuses with provider.capability_unavailable; an unknown host advertises nothing', () => {
    const hosts = ['test:///default', 'qemu+ssh://h/system'];
    const pc = new ProviderCapabilities({ hosts: () => hosts, get: () => Promise.resolve(null), list: () => Promise.resolve([]) }, open);
    assert.deepEqual(
      pc.all().map((s) => [s.provider, s.host_index]),
      [
        ['test', 0],
        ['qemu', 1],
      ],
    );
    pc.require('test:///default', 'checkpoint');
    assert.throws(
      () => pc.require('qemu+ssh://h/system', 'warm_pool'),
      (e: unknown) => e instanceof SvcError && e.code === 'provider.capability_unavailable' && e.httpStatus === 409,
    );
    assert.deepEqual(pc.advertised('test:///elsewhere.xml'), []);
  });
});
