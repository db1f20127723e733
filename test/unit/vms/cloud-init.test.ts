import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { buildCloudInit, type CloudInitInput } from '../../../src/vms/cloud-init.js';
import { buildSeed } from '../../../src/vms/qemu-files.js';
import { readIso9660 } from '../../../src/vms/iso9660.js';

const input: CloudInitInput = {
  vm: 'agent-web',
  instanceId: '0b8f3a52-7c2e-4d51-9a5e-111111111111',
  profile: 'svc-dev',
  server: '192.168.122.1:8120',
  certs: { caPem: '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n', certPem: 'CERT\n', keyPem: 'KEY\n' },
  sshKeys: [],
  macAddress: '52:54:00:AB:CD:EF',
};

interface UserData {
  hostname: string;
  users: { name: string; ssh_authorized_keys?: string[]; lock_passwd: boolean }[];
  write_files: { path: string; permissions: string; content: string }[];
  runcmd: string[][];
}

describe('cloud-init seed', () => {
  test('user-data installs the certificates (key 0600) and a unit that runs the agent with its identity', () => {
    const seed = buildCloudInit(input);
    assert.ok(seed.userData.startsWith('#cloud-config\n'));
    const ud = parse(seed.userData) as UserData;
    assert.equal(ud.hostname, 'agent-web');
    const files = Object.fromEntries(ud.write_files.map((f) => [f.path, f]));
    assert.equal(files['/etc/sandbox-agent/certs/ca.pem']?.content, input.certs.caPem);
    assert.equal(files['/etc/sandbox-agent/certs/agent.pem']?.content, 'CERT\n');
    assert.equal(files['/etc/sandbox-agent/certs/agent-key.pem']?.permissions, '0600');
    const unit = files['/etc/systemd/system/sandbox-agent.service']?.content ?? '';
    assert.match(
      unit,
      /^ExecStart=\/usr\/local\/bin\/sandbox-agent --server 192\.168\.122\.1:8120 --certs \/etc\/sandbox-agent\/certs --agent-id agent-web --instance-id 0b8f3a52-7c2e-4d51-9a5e-111111111111 --profile svc-dev --work-dir \/home\/agent\/workspace$/m,
    );
    assert.match(unit, /^Restart=on-failure$/m);
    assert.ok(ud.runcmd.some((c) => c.join(' ') === 'systemctl enable --now sandbox-agent.service'));
    assert.equal(ud.users[0]?.name, 'agent');
    assert.equal(ud.users[0]?.lock_passwd, true);
    assert.equal(ud.users[0]?.ssh_authorized_keys, undefined, 'no keys unless allowed');
  });

  test('an agentshare VM mounts its inbox and outbox 9p shares in the workspace (nofail), owned by the agent user; others mount nothing', () => {
    const ud = parse(buildCloudInit({ ...input, agentshare: true }).userData) as UserData & { mounts?: string[][] };
    assert.deepEqual(
      ud.mounts?.map((m) => m.slice(0, 3)),
      [
        ['sbx-inbox', '/home/agent/workspace/inbox', '9p'],
        ['sbx-outbox', '/home/agent/workspace/outbox', '9p'],
      ],
    );
    for (const m of ud.mounts ?? []) assert.match(m[3] ?? '', /^trans=virtio,version=9p2000\.L,.*nofail/);
    const chown = ud.runcmd.findIndex((c) => c.join(' ').includes('chown agent:agent /home/agent/workspace/$d'));
    const enable = ud.runcmd.findIndex((c) => c.join(' ') === 'systemctl enable --now sandbox-agent.service');
    assert.ok(chown >= 0 && chown < enable, "the mount points are the agent user's before the agent starts");
    assert.equal((parse(buildCloudInit(input).userData) as { mounts?: unknown }).mounts, undefined);
  });

  test('allowed SSH keys go to the agent user; meta-data and network-config', () => {
    const seed = buildCloudInit({ ...input, sshKeys: ['ssh-ed25519 AAAAC3Nz me@x'], cloudInitInstanceId: 'reseed-2' });
    assert.deepEqual((parse(seed.userData) as UserData).users[0]?.ssh_authorized_keys, ['ssh-ed25519 AAAAC3Nz me@x']);
    assert.deepEqual(parse(seed.metaData), { 'instance-id': 'reseed-2', 'local-hostname': 'agent-web' });
    assert.deepEqual(parse(seed.networkConfig), {
      version: 2,
      ethernets: { primary: { match: { macaddress: '52:54:00:ab:cd:ef' }, 'set-name': 'eth0', dhcp4: true } },
    });
  });

  test('read as YAML 1.1 (cloud-init uses PyYAML), an all-digit MAC and a yes-like name stay strings', () => {
    const seed = buildCloudInit({ ...input, vm: 'yes', macAddress: '52:54:00:12:34:56' });
    const net = parse(seed.networkConfig, { version: '1.1' }) as { ethernets: { primary: { match: { macaddress: unknown } } } };
    assert.equal(net.ethernets.primary.match.macaddress, '52:54:00:12:34:56');
    assert.equal((parse(seed.metaData, { version: '1.1' }) as Record<string, unknown>)['local-hostname'], 'yes');
    assert.equal((parse(seed.userData, { version: '1.1' }) as UserData).hostname, 'yes');
  });

  test('values that could escape the unit file or YAML are refused', () => {
    assert.throws(() => buildCloudInit({ ...input, server: 'h:1\nExecStartPre=/bin/sh' }), RangeError);
    assert.throws(() => buildCloudInit({ ...input, profile: 'a b' }), RangeError);
    assert.throws(() => buildCloudInit({ ...input, sshKeys: ['ssh-ed25519 A\nB'] }), RangeError);
    assert.throws(() => buildCloudInit({ ...input, macAddress: 'zz' }), RangeError);
  });

  test('the seed image carries the three documents under the cidata label', () => {
    const { iso, userData } = buildSeed(input);
    const back = readIso9660(iso);
    assert.equal(back.volumeId, 'CIDATA');
    assert.equal(back.files.get('user-data')?.toString(), userData);
    assert.match(back.files.get('meta-data')?.toString() ?? '', /instance-id: 0b8f3a52/);
    assert.match(back.files.get('network-config')?.toString() ?? '', /macaddress: 52:54:00:ab:cd:ef/);
  });
});
