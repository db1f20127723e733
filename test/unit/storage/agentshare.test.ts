/**
 * The agent share: a qemu guest's domain XML carries the inbox and outbox as virtio-9p shares
 * (accessmode mapped), and a local agent's work dir gets inbox/ and outbox/ links to them.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readlinkSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { qemuDomainXml } from '../../../src/hypervisor/libvirt/domain-xml.js';
import { agentshareDirs, agentshareQemuShares, INBOX_TAG, linkAgentshare, OUTBOX_TAG } from '../../../src/storage/agentshare.js';

describe('agentshare', () => {
  const base = mkdtempSync(join(tmpdir(), 'sbx-share-'));
  after(() => rmSync(base, { recursive: true, force: true }));

  test('qemu guests get the inbox and outbox as 9p shares with mapped access', async () => {
    const dirs = await agentshareDirs(join(base, 'storage'), 'agent-one');
    const xml = qemuDomainXml(
      { name: 'agent-one', vcpus: 1, memoryMiB: 256, qemu: { disks: [{ path: '/var/lib/x.qcow2' }], shares: agentshareQemuShares(dirs) } },
      'qemu',
    );
    const fs = [
      ...xml.matchAll(/<filesystem type='mount' accessmode='mapped'><source dir='([^']+)'\/><target dir='([^']+)'\/><\/filesystem>/gu),
    ];
    assert.deepEqual(
      fs.map((m) => [m[1], m[2]]),
      [
        [join(base, 'storage', 'inbox', 'agent-one'), INBOX_TAG],
        [join(base, 'storage', 'outbox', 'agent-one'), OUTBOX_TAG],
      ],
    );
    assert.ok(xml.indexOf('<filesystem') > xml.indexOf('<devices>') && xml.indexOf('<filesystem') < xml.indexOf('</devices>'));
    assert.throws(() =>
      qemuDomainXml({ name: 'agent-one', vcpus: 1, memoryMiB: 256, qemu: { shares: [{ hostPath: '/x', tag: "a' onload='x" }] } }, 'qemu'),
    );
    assert.throws(() =>
      qemuDomainXml({ name: 'agent-one', vcpus: 1, memoryMiB: 256, qemu: { shares: [{ hostPath: 'relative', tag: 'ok' }] } }, 'qemu'),
    );
    const noShare = qemuDomainXml({ name: 'agent-one', vcpus: 1, memoryMiB: 256, qemu: {} }, 'qemu');
    assert.ok(!noShare.includes('<filesystem'));
  });

  test("a local agent's work dir sees inbox/ and outbox/", async () => {
    const work = join(base, 'vms', 'agent-two', 'work');
    mkdirSync(work, { recursive: true });
    const dirs = await agentshareDirs(join(base, 'storage'), 'agent-two');
    await linkAgentshare(work, dirs);
    await linkAgentshare(work, dirs); // idempotent (a restarted agent)
    assert.equal(readlinkSync(join(work, 'inbox')), dirs.inbox);
    assert.equal(readlinkSync(join(work, 'outbox')), dirs.outbox);
    writeFileSync(join(dirs.inbox, 'task.md'), 'do it');
    assert.equal(readFileSync(join(work, 'inbox', 'task.md'), 'utf8'), 'do it');
    writeFileSync(join(work, 'outbox', 'result.txt'), 'done');
    assert.equal(readFileSync(join(dirs.outbox, 'result.txt'), 'utf8'), 'done');
  });
});
