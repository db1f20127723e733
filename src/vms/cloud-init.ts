/**
 * The cloud-init NoCloud seed of a qemu VM: user-data, meta-data and network-config.
 *
 * user-data (#cloud-config) installs the agent's identity and starts it:
 * - hostname = the VM name; an `agent` user (the spec's default guest user) without a password,
 *   with the allowed SSH keys only (none for managed svc-dev unless SVC_ENABLE_DIRECT_RUNTIME_SSH=1);
 * - write_files: /etc/sandbox-agent/certs/{ca.pem, agent.pem, agent-key.pem (0600)} and a
 *   systemd unit running `/usr/local/bin/sandbox-agent --server <addr> --certs /etc/sandbox-agent/certs
 *   --agent-id <vm> --instance-id <uuid> --profile <p> --work-dir /home/agent/workspace`
 *   (Restart=on-failure; the binary comes with the base image, `sandboxd image build`);
 * - runcmd: enable and start the unit.
 * - with a loadout (src/loadouts/apply.ts): its files under /home/agent/workspace (write_files, then
 *   chowned to the agent user in runcmd), its packages (cloud-init's `packages:`, installed by apt
 *   in the guest) and its environment in /etc/sandbox-agent/loadout.env, the unit's EnvironmentFile.
 * meta-data: instance-id (the VM uuid, plus a suffix per deploy-agent so cloud-init runs again)
 * and local-hostname. network-config (v2): DHCP on the NIC matched by the VM's MAC.
 */
import { stringify } from 'yaml';
import { environmentFileLine, type ProvisioningMaterial } from '../loadouts/apply.js';
import { INBOX_TAG, OUTBOX_TAG } from '../storage/agentshare.js';

/** Where the guest keeps the agent's identity. */
export const GUEST_CERTS_DIR = '/etc/sandbox-agent/certs';
export const GUEST_AGENT_BIN = '/usr/local/bin/sandbox-agent';
export const GUEST_USER = 'agent';
/** The loadout environment's file in the guest (the agent unit's EnvironmentFile). */
export const GUEST_LOADOUT_ENV = '/etc/sandbox-agent/loadout.env';

export interface CloudInitInput {
  vm: string;
  /** The agent's instance id (the VM uuid). */
  instanceId: string;
  /** cloud-init's instance-id; a new value makes cloud-init provision again on the next boot. Default instanceId. */
  cloudInitInstanceId?: string;
  profile: string;
  /** sandboxd's gRPC address as the guest reaches it (host:port). */
  server: string;
  /** TLS name to expect in the server certificate (default: the host part of `server`). */
  tlsServerName?: string;
  certs: { caPem: string; certPem: string; keyPem: string };
  /** OpenSSH public keys for the agent user (already filtered by policy). */
  sshKeys: readonly string[];
  macAddress: string;
  /** What the VM's loadout (and profile env) gives it. */
  loadout?: ProvisioningMaterial | null;
  /**
   * The VM's agentshare flag: its domain carries the two 9p shares (src/storage/agentshare.ts), and
   * the guest mounts them at workspace/inbox and workspace/outbox (nofail: a guest kernel without
   * 9p boots all the same, without them).
   */
  agentshare?: boolean;
}

export interface CloudInitSeed {
  userData: string;
  metaData: string;
  networkConfig: string;
}

function unit(input: CloudInitInput): string {
  const args = [
    GUEST_AGENT_BIN,
    '--server',
    input.server,
    '--certs',
    GUEST_CERTS_DIR,
    '--agent-id',
    input.vm,
    '--instance-id',
    input.instanceId,
    '--profile',
    input.profile,
    '--work-dir',
    `/home/${GUEST_USER}/workspace`,
    ...(input.tlsServerName !== undefined ? ['--tls-server-name', input.tlsServerName] : []),
  ];
  return [
    '[Unit]',
    'Description=sandbox-agent (sandboxd VM agent)',
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    `User=${GUEST_USER}`,
    ...((input.loadout ?? null) !== null ? [`EnvironmentFile=-${GUEST_LOADOUT_ENV}`] : []),
    `ExecStart=${args.join(' ')}`,
    'Restart=on-failure',
    'RestartSec=2',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

/** Every value is checked here so it cannot break out of the unit's ExecStart line. */
function checkInput(input: CloudInitInput): void {
  const plain = /^[A-Za-z0-9._:@[\]-]{1,255}$/;
  for (const [k, v] of [
    ['vm', input.vm],
    ['instanceId', input.instanceId],
    ['profile', input.profile],
    ['server', input.server],
    ['tlsServerName', input.tlsServerName],
  ] as const) {
    if (v !== undefined && !plain.test(v)) throw new RangeError(`cloud-init: ${k} has characters not allowed in a unit file`);
  }
  if (!/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i.test(input.macAddress)) throw new RangeError('cloud-init: bad MAC address');
  for (const k of input.sshKeys) if (/[\r\n]/.test(k)) throw new RangeError('cloud-init: an SSH key spans lines');
}

export function buildCloudInit(input: CloudInitInput): CloudInitSeed {
  checkInput(input);
  const user: Record<string, unknown> = { name: GUEST_USER, shell: '/bin/bash', lock_passwd: true, groups: [] };
  if (input.sshKeys.length > 0) user['ssh_authorized_keys'] = [...input.sshKeys];
  const config = {
    hostname: input.vm,
    preserve_hostname: false,
    ssh_pwauth: false,
    disable_root: true,
    users: [user],
    write_files: [
      { path: `${GUEST_CERTS_DIR}/ca.pem`, permissions: '0644', owner: 'root:root', content: input.certs.caPem },
      { path: `${GUEST_CERTS_DIR}/agent.pem`, permissions: '0644', owner: 'root:root', content: input.certs.certPem },
      // owner is set in runcmd: the agent user does not exist yet when write_files runs.
      { path: `${GUEST_CERTS_DIR}/agent-key.pem`, permissions: '0600', owner: 'root:root', content: input.certs.keyPem },
      { path: '/etc/systemd/system/sandbox-agent.service', permissions: '0644', owner: 'root:root', content: unit(input) },
    ],
    runcmd: [
      ['chown', `${GUEST_USER}:${GUEST_USER}`, `${GUEST_CERTS_DIR}/agent-key.pem`],
      ['install', '-d', '-o', GUEST_USER, '-g', GUEST_USER, `/home/${GUEST_USER}/workspace`],
      ...((input.loadout?.files.length ?? 0) > 0 ? [['chown', '-R', `${GUEST_USER}:${GUEST_USER}`, `/home/${GUEST_USER}/workspace`]] : []),
      ['systemctl', 'daemon-reload'],
      ['systemctl', 'enable', '--now', 'sandbox-agent.service'],
    ],
  };
  if (input.agentshare === true) {
    const ws = `/home/${GUEST_USER}/workspace`;
    const opts = 'trans=virtio,version=9p2000.L,msize=262144,nofail,x-systemd.device-timeout=5s';
    Object.assign(config, {
      mounts: [
        [INBOX_TAG, `${ws}/inbox`, '9p', opts, '0', '0'],
        [OUTBOX_TAG, `${ws}/outbox`, '9p', opts, '0', '0'],
      ],
    });
    // The mounts module runs before runcmd; mapped access keeps this owner in an xattr on the host.
    config.runcmd.splice(2, 0, [
      'sh',
      '-c',
      `for d in inbox outbox; do mountpoint -q ${ws}/$d && chown ${GUEST_USER}:${GUEST_USER} ${ws}/$d; done; true`,
    ]);
  }
  const l = input.loadout ?? null;
  if (l !== null) {
    for (const f of l.files)
      config.write_files.push({
        path: `/home/${GUEST_USER}/workspace/${f.path}`,
        permissions: `0${f.mode.toString(8).padStart(3, '0')}`,
        owner: 'root:root',
        content: f.content,
      });
    const env = Object.entries(l.environment).map(([k, v]) => environmentFileLine(k, v));
    config.write_files.push({ path: GUEST_LOADOUT_ENV, permissions: '0644', owner: 'root:root', content: `${env.join('\n')}\n` });
    if (l.packages.length > 0) Object.assign(config, { package_update: true, packages: [...l.packages] });
  }
  const meta = { 'instance-id': input.cloudInitInstanceId ?? input.instanceId, 'local-hostname': input.vm };
  const network = {
    version: 2,
    ethernets: { primary: { match: { macaddress: input.macAddress.toLowerCase() }, 'set-name': 'eth0', dhcp4: true } },
  };
  // cloud-init reads YAML 1.1 (PyYAML): written as 1.2, an all-digit MAC such as
  // 52:54:00:12:34:56 is a base-60 integer there (and `yes` a boolean), so cloud-init-local
  // crashed and the VM had no network. In 1.1 mode such strings are quoted.
  const yaml11 = { version: '1.1' } as const;
  return {
    userData: `#cloud-config\n${stringify(config, { ...yaml11, lineWidth: 0 })}`,
    metaData: stringify(meta, yaml11),
    networkConfig: stringify(network, yaml11),
  };
}
