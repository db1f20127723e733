/**
 * Contract of the hypervisor port, run against the libvirt implementation on libvirt's
 * in-process test driver (test:///default, which starts with one running domain named "test").
 *
 * Each test opens its own port and stops it at the end. libvirt 9 shares the test:///default
 * state between all connections of one process while any of them (or any domain handle, which
 * holds a reference) is alive, so a second raw connection opened by a test sees — and can change
 * behind the port's back — the same domains: that is how the poller is exercised without a
 * daemon. It also means state may outlive a port, so every test uses names of its own.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Hypervisor } from '@unraid/libvirt';
import { SvcError } from '../../src/core/errors.js';
import { LibvirtHypervisor } from '../../src/hypervisor/libvirt/libvirt-hypervisor.js';
import type { HypervisorEvent } from '../../src/hypervisor/port.js';

const URI = 'test:///default';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function withPort(
  fn: (hv: LibvirtHypervisor, events: HypervisorEvent[]) => Promise<void>,
  opts: Partial<ConstructorParameters<typeof LibvirtHypervisor>[0]> = {},
): Promise<void> {
  // A long poll interval: tests drive sweeps with pollNow() so counts are deterministic.
  const hv = new LibvirtHypervisor({ uris: [URI], pollIntervalMs: 60_000, ...opts });
  const events: HypervisorEvent[] = [];
  hv.onEvent((e) => events.push(e));
  await hv.start();
  try {
    await fn(hv, events);
  } finally {
    await hv.stop();
  }
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof SvcError, `expected SvcError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    return true;
  });
}

function summary(events: readonly HypervisorEvent[], name: string): string[] {
  return events.filter((e) => e.vmName === name).map((e) => `${e.type}:${e.reason}`);
}

const spec = (name: string) => ({ name, vcpus: 2, memoryMiB: 512, metadata: { profile: 'basic', diskGiB: 10, labels: { team: 'a&b' } } });

describe('hypervisor port contract (libvirt, test:///default)', () => {
  test('list and get have the documented shapes; the predefined domain is there', async () => {
    await withPort(async (hv) => {
      assert.deepEqual(hv.hosts(), [URI]);
      assert.deepEqual(hv.capabilities(), { snapshots: false, managedSave: false, events: 'polling' });
      const all = await hv.list();
      const t = all.find((d) => d.name === 'test');
      assert.ok(t, 'predefined domain "test" listed');
      assert.match(t.uuid, UUID_RE);
      assert.deepEqual(
        { ...t, uuid: '' },
        {
          name: 'test',
          uuid: '',
          state: 'running',
          vcpus: 2,
          memoryMiB: 8192,
          host: URI,
          uptimeSeconds: null,
          ipAddress: null,
          metadata: {},
        },
      );
      assert.deepEqual(await hv.get('test'), t);
      assert.equal(await hv.get('agent-missing'), null);
      const d = await hv.describe('test');
      assert.deepEqual(d.disks, ['/guest/diskimage1']);
      assert.deepEqual(d.macAddresses, ['aa:bb:cc:dd:ee:ff']);
    });
  });

  test('define, start, suspend, resume, shutdown, destroy, undefine: states and one event per change', async () => {
    await withPort(async (hv, events) => {
      const defined = await hv.define(spec('agent-life'));
      assert.equal(defined.state, 'stopped');
      assert.equal(defined.vcpus, 2);
      assert.equal(defined.memoryMiB, 512);
      assert.equal(defined.uptimeSeconds, null);
      assert.deepEqual(defined.metadata, { profile: 'basic', diskGiB: 10, labels: { team: 'a&b' } });

      const running = await hv.startDomain('agent-life');
      assert.equal(running.state, 'running');
      assert.equal(typeof running.uptimeSeconds, 'number');
      assert.equal((await hv.suspendDomain('agent-life')).state, 'paused');
      assert.equal((await hv.resumeDomain('agent-life')).state, 'running');
      assert.equal((await hv.shutdownDomain('agent-life')).state, 'stopped'); // the test driver powers off at once
      assert.equal((await hv.startDomain('agent-life')).state, 'running');
      assert.equal((await hv.destroyDomain('agent-life')).state, 'stopped');
      assert.equal((await hv.get('agent-life'))?.state, 'stopped');
      await hv.undefine('agent-life');
      assert.equal(await hv.get('agent-life'), null);

      await hv.pollNow(); // the poller sees nothing new: our own calls already reported everything
      assert.deepEqual(summary(events, 'agent-life'), [
        'vm.defined:added',
        'vm.started:booted',
        'vm.suspended:paused',
        'vm.resumed:unpaused',
        'vm.shutdown:requested',
        'vm.stopped:shutdown',
        'vm.started:booted',
        'vm.stopped:destroyed',
        'vm.undefined:removed',
      ]);
      assert.ok(events.every((e) => e.source === 'sandboxd' && e.host === URI));
      const stopped = events.find((e) => e.vmName === 'agent-life' && e.type === 'vm.stopped');
      assert.equal(stopped?.previousState, 'running');
      assert.equal(stopped?.state, 'stopped');
      assert.equal(typeof stopped?.uptimeSeconds, 'number');
    });
  });

  test('errors carry the table codes', async () => {
    await withPort(async (hv) => {
      await rejectsWith(hv.startDomain('agent-nope'), 'VM_NOT_FOUND');
      await rejectsWith(hv.shutdownDomain('agent-nope'), 'VM_NOT_FOUND');
      await rejectsWith(hv.undefine('agent-nope'), 'VM_NOT_FOUND');
      await rejectsWith(hv.describe('agent-nope'), 'VM_NOT_FOUND');
      await rejectsWith(hv.define({ name: 'test', vcpus: 1, memoryMiB: 64 }), 'VM_ALREADY_EXISTS');
      await hv.define(spec('agent-err'));
      await rejectsWith(hv.define(spec('agent-err')), 'VM_ALREADY_EXISTS');
      await rejectsWith(hv.shutdownDomain('agent-err'), 'VM_NOT_RUNNING');
      await rejectsWith(hv.destroyDomain('agent-err'), 'VM_NOT_RUNNING');
      await rejectsWith(hv.suspendDomain('agent-err'), 'VM_NOT_RUNNING');
      await hv.startDomain('agent-err');
      await rejectsWith(hv.startDomain('agent-err'), 'VM_RUNNING');
      await rejectsWith(hv.resumeDomain('agent-err'), 'VM_RUNNING');
      await rejectsWith(hv.undefine('agent-err'), 'VM_RUNNING');
      await rejectsWith(hv.define({ name: 'bad name', vcpus: 1, memoryMiB: 64 }), 'request.invalid');
      await rejectsWith(hv.define({ name: 'agent-x', vcpus: 0, memoryMiB: 64 }), 'request.invalid');
      await rejectsWith(hv.define({ name: 'agent-x', vcpus: 1, memoryMiB: 64 }, { host: 'qemu:///nowhere' }), 'request.invalid');
      await rejectsWith(hv.list({ host: 'qemu:///nowhere' }), 'request.invalid');
    });
  });

  test('undefine with force destroys a running VM first and reports both changes', async () => {
    await withPort(async (hv, events) => {
      await hv.define(spec('agent-force'));
      await hv.startDomain('agent-force');
      await hv.undefine('agent-force', { force: true });
      assert.equal(await hv.get('agent-force'), null);
      assert.deepEqual(summary(events, 'agent-force').slice(-2), ['vm.stopped:destroyed', 'vm.undefined:removed']);
    });
  });

  test('list filters by prefix, state and host', async () => {
    await withPort(async (hv) => {
      await hv.define(spec('agent-f1'));
      await hv.define(spec('agent-f2'));
      await hv.startDomain('agent-f2');
      // Names are unique per test: the process-wide test:///default state may outlive a port.
      assert.deepEqual(
        (await hv.list({ prefix: 'agent-f' })).map((d) => d.name),
        ['agent-f1', 'agent-f2'],
      );
      assert.deepEqual(
        (await hv.list({ prefix: 'agent-f', states: ['running'] })).map((d) => d.name),
        ['agent-f2'],
      );
      assert.ok((await hv.list({ states: ['stopped'] })).every((d) => d.state === 'stopped'));
      assert.deepEqual(
        (await hv.list({ states: ['running'] })).filter((d) => d.name === 'test' || d.name.startsWith('agent-f')).map((d) => d.name),
        ['agent-f2', 'test'],
      );
      const onHost = await hv.list({ host: URI });
      assert.ok(onHost.length >= 3 && onHost.every((d) => d.host === URI));
    });
  });

  test('20 domains defined and started in parallel all run, each with one defined and one started event', async () => {
    await withPort(async (hv, events) => {
      const names = Array.from({ length: 20 }, (_, i) => `agent-par-${i}`);
      const t0 = performance.now();
      const infos = await Promise.all(
        names.map(async (n) => {
          await hv.define(spec(n));
          return hv.startDomain(n);
        }),
      );
      const ms = performance.now() - t0;
      assert.ok(infos.every((i) => i.state === 'running'));
      const listed = await hv.list({ prefix: 'agent-par-', states: ['running'] });
      assert.equal(listed.length, 20);
      assert.equal(new Set(listed.map((d) => d.uuid)).size, 20);
      await hv.pollNow();
      for (const n of names) assert.deepEqual(summary(events, n), ['vm.defined:added', 'vm.started:booted'], n);
      process.stdout.write(`# 20 parallel define+start on test:///default: ${ms.toFixed(0)} ms\n`);
    });
  });

  test('a VM defined while a sweep runs keeps its metadata (its create then starts its agent)', async () => {
    await withPort(async (hv) => {
      // The poller and every list() sweep; a define overlapping one lost its metadata to it (299 of 300).
      const names = Array.from({ length: 30 }, (_, i) => `agent-sweep-${i}`);
      for (const n of names) {
        const [, defined] = await Promise.all([hv.list(), hv.define(spec(n))]);
        assert.deepEqual(defined.metadata, spec(n).metadata, `${n} as defined`);
        assert.deepEqual((await hv.startDomain(n)).metadata, spec(n).metadata, `${n} as started`);
      }
      for (const n of names) await hv.undefine(n, { force: true });
    });
  });

  test('concurrent defines of one name: exactly one wins', async () => {
    await withPort(async (hv) => {
      const results = await Promise.allSettled(Array.from({ length: 5 }, () => hv.define(spec('agent-race'))));
      assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
      for (const r of results) if (r.status === 'rejected') assert.equal((r.reason as SvcError).code, 'VM_ALREADY_EXISTS');
    });
  });

  test("the poller reports changes made behind the port's back, once each", async () => {
    await withPort(async (hv, events) => {
      await hv.define(spec('agent-back'));
      await hv.startDomain('agent-back');
      const raw = new Hypervisor({ uri: URI });
      await raw.connectOpen();
      try {
        const d = await raw.domainLookupByName('agent-back');
        await d.destroy();
        await hv.pollNow();
        await hv.pollNow();
        await d.create();
        await hv.pollNow();
        await d.destroy();
        await d.create(); // down and up between two sweeps: a new runtime id
        await hv.pollNow();
        await d.suspend();
        await hv.pollNow();
        await d.destroy();
        await d.undefine();
        await raw.domainDefineXML(
          `<domain type='test'><name>agent-foreign</name><memory unit='MiB'>64</memory><os><type>hvm</type></os></domain>`,
        );
        await hv.pollNow();
      } finally {
        await raw.connectClose();
      }
      const polled = events.filter((e) => e.source === 'poller');
      assert.deepEqual(summary(polled, 'agent-back'), [
        'vm.stopped:unknown',
        'vm.started:booted',
        'vm.rebooted:restarted',
        'vm.suspended:paused',
        'vm.stopped:unknown',
        'vm.undefined:removed',
      ]);
      assert.deepEqual(summary(polled, 'agent-foreign'), ['vm.defined:added']);
      const foreign = await hv.get('agent-foreign');
      assert.deepEqual(foreign?.metadata, {});
    });
  });

  test('health answers ok with the host and its latency', async () => {
    await withPort(async (hv) => {
      const h = await hv.health();
      assert.equal(h.status, 'ok');
      assert.equal(h.hypervisor, URI);
      assert.equal(h.circuit, 'closed');
      assert.equal(h.hosts.length, 1);
      assert.equal(h.hosts[0]?.status, 'ok');
      assert.equal(typeof h.hosts[0]?.latencyMs, 'number');
    });
  });

  test('start and stop are idempotent; calls after stop fail with HYPERVISOR_UNAVAILABLE', async () => {
    const hv = new LibvirtHypervisor({ uris: [URI], pollIntervalMs: 60_000 });
    await Promise.all([hv.start(), hv.start()]);
    await hv.start();
    assert.ok((await hv.list()).length >= 1);
    await Promise.all([hv.stop(), hv.stop()]);
    await hv.stop();
    await rejectsWith(hv.list(), 'HYPERVISOR_UNAVAILABLE');
    await rejectsWith(hv.start(), 'server.unavailable');
  });
});
