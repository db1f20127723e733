import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { macFromName, qemuDomainXml } from '../../../src/hypervisor/libvirt/domain-xml.js';
import { overlayArgs, qemuSpecFor, vsockCidFor } from '../../../src/vms/qemu-files.js';
import { isInside, vmPaths } from '../../../src/vms/vm-paths.js';

describe('qemu VM files and domain spec', () => {
  const uuid = '6f1c2b7e-9d3a-4c55-8e21-0a1b2c3d4e5f';
  const paths = vmPaths('/var/lib/sandboxd', 'agent-q1');

  test('paths live under <state>/vms/<name>/', () => {
    assert.equal(paths.dir, '/var/lib/sandboxd/vms/agent-q1');
    assert.equal(paths.disk, '/var/lib/sandboxd/vms/agent-q1/disk.qcow2');
    assert.equal(paths.seed, '/var/lib/sandboxd/vms/agent-q1/seed.iso');
    assert.ok(isInside(paths.dir, paths.disk));
    assert.ok(!isInside(paths.dir, '/var/lib/sandboxd/vms/agent-q1/../agent-q2/disk.qcow2'));
    assert.ok(!isInside(paths.dir, '/guest/diskimage1'));
    assert.throws(() => vmPaths('/s', '..'));
    assert.throws(() => vmPaths('/s', 'a/b'));
  });

  test('the overlay is a qcow2 on the base image with the requested size', () => {
    assert.deepEqual(overlayArgs('/images/base.qcow2', paths.disk, 50), [
      'create',
      '-f',
      'qcow2',
      '-F',
      'qcow2',
      '-b',
      '/images/base.qcow2',
      paths.disk,
      '50G',
    ]);
  });

  test('vsock CIDs are stable, in range, and differ between VMs', () => {
    assert.equal(vsockCidFor(uuid), vsockCidFor(uuid.toUpperCase()));
    const cids = new Set(Array.from({ length: 500 }, (_, i) => vsockCidFor(`00000000-0000-4000-8000-${String(i).padStart(12, '0')}`)));
    assert.equal(cids.size, 500);
    for (const c of cids) assert.ok(c >= 3 && c <= 0x7fffffff);
  });

  test('the domain XML has virtio disks (seed read-only), a NIC with the name-derived MAC, vsock and a serial log', () => {
    const xml = qemuDomainXml(
      {
        name: 'agent-q1',
        uuid,
        vcpus: 2,
        memoryMiB: 2048,
        metadata: { profile: 'svc-dev', instanceId: uuid },
        qemu: qemuSpecFor(paths, uuid, { network: 'default' }),
      },
      'kvm',
    );
    assert.match(xml, /<domain type='kvm'>/);
    assert.match(xml, /<source file='\/var\/lib\/sandboxd\/vms\/agent-q1\/disk\.qcow2'\/><target dev='vda' bus='virtio'\/>/);
    assert.match(
      xml,
      /<driver name='qemu' type='raw'\/><source file='\/var\/lib\/sandboxd\/vms\/agent-q1\/seed\.iso'\/><target dev='vdb' bus='virtio'\/><readonly\/>/,
    );
    assert.ok(xml.includes(`<mac address='${macFromName('agent-q1')}'/><source network='default'/><model type='virtio'/>`));
    assert.ok(xml.includes(`<cid auto='no' address='${vsockCidFor(uuid)}'/>`));
    assert.match(xml, /<serial type='file'><source path='\/var\/lib\/sandboxd\/vms\/agent-q1\/console\.log' append='on'\/>/);
    assert.match(xml, /machine='q35'/);
    assert.match(xml, new RegExp(`<sbx:instance-id>${uuid}</sbx:instance-id>`));
  });
});
