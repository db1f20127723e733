/**
 * Several hosts (SVC_HYPERVISOR_URI with a comma list). Each host here is an in-process test
 * driver loaded from its own node file (test:///<file>.xml), which — unlike test:///default —
 * gives every connection a separate, empty hypervisor: two independent "hosts".
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { SvcError } from '../../src/core/errors.js';
import { LibvirtHypervisor } from '../../src/hypervisor/libvirt/libvirt-hypervisor.js';

function makeHosts(n: number): { uris: string[]; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-hosts-'));
  const uris = Array.from({ length: n }, (_, i) => {
    const file = join(dir, `host-${i}.xml`);
    writeFileSync(file, '<node>\n</node>\n');
    return `test://${file}`;
  });
  return { uris, dir };
}

const spec = (name: string) => ({ name, vcpus: 1, memoryMiB: 128 });

describe('hypervisor port with several hosts', () => {
  test('placement by fewest domains, names unique across hosts, list and get cover every host', async () => {
    const { uris, dir } = makeHosts(2);
    const [a, b] = uris as [string, string];
    const hv = new LibvirtHypervisor({ uris, pollIntervalMs: 60_000 });
    await hv.start();
    try {
      assert.deepEqual(hv.hosts(), uris);
      await hv.define(spec('agent-pinned-1'), { host: a });
      await hv.define(spec('agent-pinned-2'), { host: a });
      // b is emptier, so the next two land there; then they are even and config order wins.
      const placed = [];
      for (const n of ['agent-m1', 'agent-m2', 'agent-m3']) placed.push((await hv.define(spec(n))).host);
      assert.deepEqual(placed, [b, b, a]);

      await assert.rejects(
        hv.define(spec('agent-m1'), { host: a }),
        (e: unknown) => e instanceof SvcError && e.code === 'VM_ALREADY_EXISTS',
      );
      const all = await hv.list();
      assert.deepEqual(
        all.map((d) => [d.name, d.host]),
        [
          ['agent-m1', b],
          ['agent-m2', b],
          ['agent-m3', a],
          ['agent-pinned-1', a],
          ['agent-pinned-2', a],
        ],
      );
      assert.equal((await hv.get('agent-m2'))?.host, b);
      assert.equal((await hv.startDomain('agent-m2')).state, 'running');
      assert.deepEqual(
        (await hv.list({ host: b, states: ['running'] })).map((d) => d.name),
        ['agent-m2'],
      );
      await hv.undefine('agent-m2', { force: true });
      assert.equal(await hv.get('agent-m2'), null);
      const h = await hv.health();
      assert.equal(h.status, 'ok');
      assert.equal(h.hypervisor, uris.join(','));
    } finally {
      await hv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('one host down: health is degraded (200), list answers with the others, define refuses rather than risk a duplicate', async () => {
    const { uris, dir } = makeHosts(1);
    const dead = `test+unix:///default?socket=${join(dir, 'dead.sock')}`;
    const hv = new LibvirtHypervisor({ uris: [uris[0]!, dead], pollIntervalMs: 60_000, virshEvents: 'off' });
    await hv.start();
    try {
      await assert.rejects(hv.define(spec('agent-d')), (e: unknown) => e instanceof SvcError && e.code === 'HYPERVISOR_UNAVAILABLE');
      const h = await hv.health();
      assert.equal(h.status, 'degraded');
      assert.deepEqual(
        h.hosts.map((x) => x.status),
        ['ok', 'down'],
      );
      assert.deepEqual(await hv.list(), []);
    } finally {
      await hv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
