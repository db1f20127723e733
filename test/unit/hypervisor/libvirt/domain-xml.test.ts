/**
 * Domain XML: generated values are escaped, the MAC is stable, bad specs are refused, and
 * libvirt's own parser (the in-process test driver) accepts what we generate and gives our
 * metadata back unchanged.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { Hypervisor } from '@unraid/libvirt';
import { SvcError } from '../../../../src/core/errors.js';
import {
  escapeXml,
  hasControlChars,
  macFromName,
  parseDiskPaths,
  parseMacAddresses,
  parseMetadata,
  qemuDomainXml,
  testDomainXml,
  unescapeXml,
} from '../../../../src/hypervisor/libvirt/domain-xml.js';
import type { DomainSpec } from '../../../../src/hypervisor/port.js';
import { withFreshInstanceId } from '../../../../src/hypervisor/libvirt/test-save-image.js';

const conn = new Hypervisor({ uri: 'test:///default' });
before(() => conn.connectOpen());
after(() => conn.connectClose());

const full: DomainSpec = {
  name: 'agent-q1',
  uuid: '0b8f1c4e-3c55-4d0e-9a53-0c2b7f5d9e10',
  vcpus: 2,
  memoryMiB: 512,
  metadata: {
    profile: 'svc-dev',
    diskGiB: 50,
    instanceId: 'i-1',
    ipAddress: '192.168.213.10',
    accelerator: 'tcg',
    labels: { owner: `o'<&>"` },
  },
  qemu: {
    disks: [
      { path: '/var/lib/sandboxd/vms/agent-q1/root.qcow2' },
      { path: '/var/lib/sandboxd/vms/agent-q1/seed.img', format: 'raw', readOnly: true },
    ],
    network: 'sandboxd-iso',
    vsockCid: 42,
    serialLogPath: '/var/lib/sandboxd/vms/agent-q1/console.log',
    kernel: { path: '/img/vmlinux', initrdPath: '/img/initrd.cpio', cmdline: 'console=ttyS0 quiet panic=-1' },
    fwCfgFiles: { 'opt/sandboxd/agent.env': '/var/lib/sandboxd/vms/agent-q1/agent.env' },
    tcgCacheMiB: 64,
  },
};

function refused(fn: () => unknown, re: RegExp): void {
  assert.throws(fn, (e: unknown) => e instanceof SvcError && e.code === 'request.invalid' && re.test(e.message));
}

describe('domain XML', () => {
  test('MAC addresses are deterministic, distinct per name and in 52:54:00', () => {
    assert.equal(macFromName('agent-a'), macFromName('agent-a'));
    assert.notEqual(macFromName('agent-a'), macFromName('agent-b'));
    fc.assert(fc.property(fc.string({ minLength: 1 }), (n) => assert.match(macFromName(n), /^52:54:00(:[0-9a-f]{2}){3}$/)));
  });

  test('escaping round-trips and leaves no markup', () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        const e = escapeXml(s);
        assert.ok(!/[<>"']/.test(e));
        assert.ok(!/&(?!amp;|lt;|gt;|quot;|apos;)/.test(e));
        assert.equal(unescapeXml(e), s);
      }),
    );
  });

  test('qemu XML carries every device, the derived MAC, and our metadata', () => {
    const xml = qemuDomainXml(full, 'qemu');
    assert.match(xml, /^<domain type='qemu'>/);
    assert.match(xml, /<source file='\/var\/lib\/sandboxd\/vms\/agent-q1\/root.qcow2'\/><target dev='vda' bus='virtio'\/>/);
    assert.match(xml, /<driver name='qemu' type='raw'\/><source file='[^']*seed.img'\/><target dev='vdb' bus='virtio'\/><readonly\/>/);
    assert.match(xml, new RegExp(`<mac address='${macFromName('agent-q1')}'/><source network='sandboxd-iso'/><model type='virtio'/>`));
    assert.match(xml, /<vsock model='virtio'><cid auto='no' address='42'\/><\/vsock>/);
    assert.match(xml, /<serial type='file'><source path='[^']*console.log' append='on'\/>/);
    assert.match(xml, /<tb-cache unit='MiB'>64<\/tb-cache>/);
    assert.match(xml, /<on_crash>preserve<\/on_crash>/);
    assert.match(xml, /o&apos;&lt;&amp;&gt;&quot;/);
    assert.ok(!xml.includes(`o'<&>"`));
    assert.deepEqual(parseMetadata(xml), full.metadata);
    assert.match(xml, /<sbx:accelerator>tcg<\/sbx:accelerator>/);
    refused(() => qemuDomainXml({ ...full, metadata: { accelerator: 'hvf' as 'kvm' } }, 'qemu'), /accelerator must be kvm or tcg/);
    assert.deepEqual(
      parseDiskPaths(xml),
      full.qemu!.disks!.map((d) => d.path),
    );
    assert.deepEqual(parseMacAddresses(xml), [macFromName('agent-q1')]);
    assert.match(
      qemuDomainXml({ ...full, qemu: { ...full.qemu!, kernel: undefined as never } }, 'kvm'),
      /^<domain type='kvm'>[\s\S]*<boot dev='hd'\/>/,
    );
  });

  test('libvirt parses the generated XML (qemu layout checked as a test domain) and keeps our metadata', async () => {
    const asTest = qemuDomainXml({ ...full, name: 'agent-xml-q', uuid: '0b8f1c4e-3c55-4d0e-9a53-0c2b7f5d9e11' }, 'qemu').replace(
      "type='qemu'",
      "type='test'",
    );
    const d = await conn.domainDefineXML(asTest);
    const back = await d.getXMLDesc();
    assert.deepEqual(parseMetadata(back), full.metadata);
    assert.deepEqual(
      parseDiskPaths(back),
      full.qemu!.disks!.map((x) => x.path),
    );
    assert.deepEqual(parseMacAddresses(back), [macFromName('agent-xml-q')]);
    await d.undefine();
  });

  test('any printable label value and profile survives libvirt and comes back equal', async () => {
    let i = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(
          fc.stringMatching(/^[A-Za-z0-9_./-]{1,20}$/),
          fc.string({ maxLength: 40 }).filter((s) => !hasControlChars(s)),
          { maxKeys: 4 },
        ),
        fc.string({ minLength: 1, maxLength: 30 }).filter((s) => !hasControlChars(s)),
        async (labels, profile) => {
          const name = `agent-prop-${i++}`;
          const metadata = { profile, labels };
          const d = await conn.domainDefineXML(testDomainXml({ name, vcpus: 1, memoryMiB: 64, metadata }));
          try {
            const got = parseMetadata(await d.getXMLDesc());
            assert.deepEqual(got, Object.keys(labels).length === 0 ? { profile } : { profile, labels: { ...labels } });
          } finally {
            await d.undefine();
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  test('bad specs are refused before any XML is made', () => {
    const base = { name: 'agent-ok', vcpus: 1, memoryMiB: 64 };
    refused(() => testDomainXml({ ...base, name: "a'b" }), /name/);
    refused(() => testDomainXml({ ...base, name: '' }), /name/);
    refused(() => testDomainXml({ ...base, uuid: 'nope' }), /uuid/);
    refused(() => testDomainXml({ ...base, vcpus: 1.5 }), /vcpus/);
    refused(() => testDomainXml({ ...base, memoryMiB: 1 }), /memoryMiB/);
    refused(() => testDomainXml({ ...base, metadata: { labels: { 'bad key': 'x' } } }), /label key/);
    refused(() => testDomainXml({ ...base, metadata: { profile: 'a\u0001b' } }), /control character/);
    refused(() => qemuDomainXml({ ...base, qemu: { disks: [{ path: 'relative.qcow2' }] } }, 'qemu'), /absolute/);
    refused(() => qemuDomainXml({ ...base, qemu: { network: "net' evil='1" } }, 'qemu'), /network/);
    refused(() => qemuDomainXml({ ...base, qemu: { macAddress: 'zz', network: 'n' } }, 'qemu'), /macAddress/);
    refused(() => qemuDomainXml({ ...base, qemu: { vsockCid: 2 } }, 'qemu'), /vsockCid/);
    refused(() => qemuDomainXml({ ...base, qemu: { fwCfgFiles: { 'etc/x': '/f' } } }, 'qemu'), /fw_cfg/);
  });

  test('foreign domains have no metadata', () => {
    assert.deepEqual(parseMetadata("<domain type='test'><name>x</name></domain>"), {});
  });

  test('a qemu restore XML gets a fresh instance id and keeps the uuid (libvirt refuses another on restore)', () => {
    const uuid = '6f1c0d3e-0b3a-4c55-9d1e-1a2b3c4d5e6f';
    const xml = qemuDomainXml(
      { name: 'agent-ck', uuid, vcpus: 1, memoryMiB: 256, metadata: { instanceId: uuid, profile: 'basic' } },
      'qemu',
    );
    const fresh = withFreshInstanceId(xml, 'i-fresh');
    assert.equal(parseMetadata(fresh).instanceId, 'i-fresh');
    assert.equal(parseMetadata(fresh).profile, 'basic');
    assert.match(fresh, new RegExp(`<uuid>${uuid}</uuid>`));
    assert.throws(() => withFreshInstanceId("<domain type='qemu'><name>x</name></domain>", 'i'), /no sandboxd instance id/);
  });
});
