import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AGENT_NODE_OPTIONS, FW_CFG_PREFIX, GUEST_INIT, GUEST_MODULES } from '../../../src/image/guest-init.js';
import { agentEnv, fwCfgFiles, pickAddress } from '../../../src/vms/fw-cfg.js';

const settings = {
  server: '192.168.213.1:8120',
  agentId: 'agent-a',
  instanceId: '0e5c1f7e-7a4b-4c5d-9e1f-2a3b4c5d6e7f',
  profile: 'basic',
  hostname: 'agent-a',
  ipCidr: '192.168.213.10/24',
  gateway: '192.168.213.1',
};

void describe('minimal guest image', () => {
  void test('modules load dependencies first (busybox insmod resolves nothing)', () => {
    const at = (m: string): number => GUEST_MODULES.indexOf(m);
    assert.ok(at('virtio_ring') < at('virtio_pci') && at('virtio_pci') < at('virtio_net') && at('net_failover') < at('virtio_net'));
    assert.ok(at('jbd2') < at('ext4') && at('mbcache') < at('ext4') && at('crc16') < at('ext4'));
    assert.ok(at('qemu_fw_cfg') >= 0);
  });

  void test('/init takes the settings and certificates from fw_cfg files, never from the kernel command line', () => {
    assert.ok(GUEST_INIT.startsWith('#!/bin/sh\n'));
    assert.ok(GUEST_INIT.includes(`/sys/firmware/qemu_fw_cfg/by_name/${FW_CFG_PREFIX}`));
    assert.ok(!GUEST_INIT.includes('/proc/cmdline'));
    assert.match(GUEST_INIT, /--certs \/run\/sbx\/certs/);
    // integration/agents-identity runs the agent with these options to show it still registers and trusts only its CA
    assert.ok(GUEST_INIT.includes(`node ${AGENT_NODE_OPTIONS.join(' ')} /opt/sbx/agent/src/bin/sandbox-agent.js `));
    for (const f of Object.keys(fwCfgFiles('/x'))) assert.ok(f.startsWith(`${FW_CFG_PREFIX}/`));
  });

  void test('agent.env carries the settings and refuses a value that could inject shell', () => {
    const text = agentEnv(settings);
    assert.match(text, /^SBX_SERVER=192\.168\.213\.1:8120$/m);
    assert.match(text, /^SBX_IP=192\.168\.213\.10\/24$/m);
    assert.throws(() => agentEnv({ ...settings, hostname: 'a; reboot' }), /SBX_HOSTNAME/);
    assert.throws(() => agentEnv({ ...settings, agentId: '$(id)' }), /SBX_AGENT_ID/);
  });

  void test('static addresses skip the gateway and taken ones, and run out cleanly', () => {
    assert.equal(pickAddress('192.168.213.1', new Set()), '192.168.213.10');
    assert.equal(pickAddress('192.168.213.1', new Set(['192.168.213.10', '192.168.213.11'])), '192.168.213.12');
    const all = new Set(Array.from({ length: 241 }, (_, i) => `10.0.0.${i + 10}`));
    assert.equal(pickAddress('10.0.0.1', all), null);
    assert.equal(pickAddress('not-an-ip', new Set()), null);
  });
});

void describe('overlay of a built image', () => {
  void test('is never smaller than its raw base (a truncated ext4 does not mount), and says the base format', async () => {
    const { overlayArgs } = await import('../../../src/vms/qemu-files.js');
    assert.deepEqual(overlayArgs('/img/disk.ext4', '/v/disk.qcow2', 1, 2 * 1024 ** 3), [
      'create',
      '-f',
      'qcow2',
      '-F',
      'raw',
      '-b',
      '/img/disk.ext4',
      '/v/disk.qcow2',
      String(2 * 1024 ** 3),
    ]);
    assert.equal(overlayArgs('/img/disk.ext4', '/v/disk.qcow2', 50, 2 * 1024 ** 3).at(-1), '50G');
    assert.equal(overlayArgs('/img/base.qcow2', '/v/disk.qcow2', 50)[4], 'qcow2');
  });
});
