/**
 * qemu VMs booted from a `sandboxd image build` image (src/image/): direct PVH kernel boot, the
 * image disk as a copy-on-write overlay, a static address on the isolated network, and the
 * agent's settings and mTLS files handed over through fw_cfg files (QEMU reads the files named
 * in the domain XML; only paths appear on its command line, never contents).
 *
 * Files per VM under <vm>/fwcfg/ (0700; owned by the user QEMU runs as, libvirt-qemu, when it
 * exists, because QEMU opens them itself): agent.env, ca.pem, agent.pem, agent-key.pem, loadout.json
 * (the VM's loadout material, empty without one); and for a
 * `debian` image VM created with SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH set, ssh-ca.pub (the CA
 * public key line without its comment), ssh-user and ssh-principals (src/image/guest-ssh.ts reads
 * them in the guest). Nothing of SSH otherwise. A VM created with `enrollment: deferred` gets
 * empty certificate files, SBX_ENROLLMENT=deferred and bootstrap.json, a fixed-size placeholder
 * its agent polls until a checkpoint restore puts bootstrap material there (writeBootstrapFwCfg).
 */
import { chown, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { dirname, join } from 'node:path';
import { FW_CFG_PREFIX, LOADOUT_FW_CFG_NAME } from '../image/guest-init.js';
import { SSH_FW_CFG_NAMES } from '../image/guest-ssh.js';
import type { ProvisioningMaterial } from '../core/loadout-apply.js';
import type { QemuDomainSpec } from '../hypervisor/port.js';

const execFileAsync = promisify(execFile);

/** A built image found next to SVC_VM_BASE_IMAGE (its manifest.json). */
export interface BootImage {
  kind: 'minimal' | 'debian';
  kernel: string;
  initrd: string;
  cmdline: string;
  disk: string;
}

/** TCG translation cache per guest, MiB (without a cap QEMU grows to 0.6-1 GiB per guest). */
export const TCG_CACHE_MIB = 64;

/** The image whose disk is `baseImage`, or null when it is a plain qcow2 (cloud-init path). */
export async function loadBootImage(baseImage: string | null): Promise<BootImage | null> {
  if (baseImage === null) return null;
  const dir = dirname(baseImage);
  try {
    const m = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as {
      kind?: string;
      cmdline?: string;
      files?: { kernel?: string; initrd?: string; disk?: string };
    };
    if (
      (m.kind !== 'minimal' && m.kind !== 'debian') ||
      m.files?.kernel === undefined ||
      m.files.initrd === undefined ||
      m.cmdline === undefined
    )
      return null;
    return { kind: m.kind, kernel: join(dir, m.files.kernel), initrd: join(dir, m.files.initrd), cmdline: m.cmdline, disk: baseImage };
  } catch {
    return null;
  }
}

export interface GuestSettings {
  server: string;
  agentId: string;
  instanceId: string;
  profile: string;
  hostname: string;
  /** a.b.c.d/24 */
  ipCidr: string;
  gateway: string;
  /** `deferred`: no certificate; the guest's agent waits for bootstrap material in fw_cfg bootstrap.json. */
  enrollment?: 'deferred';
}

const SAFE = /^[A-Za-z0-9_.:/@+-]{1,253}$/;

/** agent.env: SBX_* lines the guest's /init sources; every value is checked against a safe set so it cannot inject shell. */
export function agentEnv(s: GuestSettings): string {
  const lines = {
    SBX_SERVER: s.server,
    SBX_AGENT_ID: s.agentId,
    SBX_INSTANCE_ID: s.instanceId,
    SBX_PROFILE: s.profile,
    SBX_HOSTNAME: s.hostname,
    SBX_IP: s.ipCidr,
    SBX_GW: s.gateway,
    ...(s.enrollment === 'deferred' ? { SBX_ENROLLMENT: 'deferred' } : {}),
  };
  return Object.entries(lines)
    .map(([k, v]) => {
      if (!SAFE.test(v)) throw new Error(`${k} has characters the guest cannot take: ${v.slice(0, 64)}`);
      return `${k}=${v}\n`;
    })
    .join('');
}

/** What a guest's sshd trusts (SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH, _AUTHORIZED_USER, _AUTHORIZED_PRINCIPALS). */
export interface GuestSsh {
  /** The CA public key file's text (one key; its comment is dropped). */
  caPublicKey: string;
  user: string;
  /** Empty: the user's name. */
  principals: readonly string[];
}

/**
 * `<type> <base64>` of a public key file holding exactly one key (comment and blank lines
 * dropped). Throws on anything else, a private key above all: it must never reach a guest.
 */
export function sshPublicKeyLine(text: string): string {
  if (/PRIVATE KEY/.test(text)) throw new Error('the SSH CA public key file holds a private key');
  const lines = text.split('\n').filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'));
  const m =
    lines.length === 1
      ? /^((?:ssh|ecdsa|sk)-[A-Za-z0-9@.+-]{1,64}) ([A-Za-z0-9+/]{32,}={0,3})(?:\s.*)?$/.exec(lines[0]?.trim() ?? '')
      : null;
  if (m?.[1] === undefined || m[2] === undefined) throw new Error('the SSH CA public key file is not one OpenSSH public key line');
  return `${m[1]} ${m[2]}`;
}

const SSH_USER = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/;
const SSH_PRINCIPAL = /^[A-Za-z0-9_.@+-]{1,128}$/;

/** The SSH fw_cfg files' contents by name (SSH_FW_CFG_NAMES); checked as the guest checks them. */
export function guestSshFiles(s: GuestSsh): [string, string][] {
  if (!SSH_USER.test(s.user)) throw new Error(`the SSH user is not a user name: ${s.user.slice(0, 40)}`);
  const principals = s.principals.length > 0 ? s.principals : [s.user];
  const bad = principals.find((p) => !SSH_PRINCIPAL.test(p));
  if (bad !== undefined) throw new Error(`an SSH principal has characters sshd would misread: ${bad.slice(0, 40)}`);
  const [ca, user, prin] = SSH_FW_CFG_NAMES;
  return [
    [ca, `${sshPublicKeyLine(s.caPublicKey)}\n`],
    [user, `${s.user}\n`],
    [prin, `${principals.join('\n')}\n`],
  ];
}

/**
 * The fw_cfg file of a deferred-enrollment VM's bootstrap material: always BOOTSTRAP_FW_CFG_BYTES
 * long (a placeholder at boot, the material padded with spaces at restore), since the guest
 * kernel sizes each fw_cfg entry once at boot while QEMU reads the file anew at each start.
 */
export const BOOTSTRAP_FW_CFG = 'bootstrap.json';
export const BOOTSTRAP_FW_CFG_BYTES = 8192;

/**
 * The fw_cfg file of what the VM's loadout and profile give it (ProvisioningMaterial as JSON;
 * empty when nothing): the guest agent applies it (`--loadout-file`, src/core/loadout-apply.ts).
 * Every built-image VM lists it, so a VM whose loadout is set later needs no new domain.
 */
export const LOADOUT_FW_CFG = LOADOUT_FW_CFG_NAME;

/** fw_cfg name → host file for a VM's folder (with `ssh`, the SSH settings too; `deferred`: the bootstrap file too). */
export function fwCfgFiles(fwDir: string, ssh = false, deferred = false): Record<string, string> {
  const out: Record<string, string> = {};
  const names = [
    'agent.env',
    'ca.pem',
    'agent.pem',
    'agent-key.pem',
    LOADOUT_FW_CFG,
    ...(ssh ? SSH_FW_CFG_NAMES : []),
    ...(deferred ? [BOOTSTRAP_FW_CFG] : []),
  ];
  for (const f of names) out[`${FW_CFG_PREFIX}/${f}`] = join(fwDir, f);
  return out;
}

/**
 * Writes the fw_cfg files (0600, handed to libvirt-qemu when that user exists). `ssh`: the SSH
 * settings; 'empty' writes the SSH files empty (a VM whose domain lists them, provisioned again
 * after SSH was switched off: QEMU needs the files, the guest then leaves sshd off); null or
 * absent writes none and removes any earlier ones.
 */
export async function writeFwCfg(
  fwDir: string,
  settings: GuestSettings,
  certs: { caPem: string; certPem: string; keyPem: string } | null,
  ssh: GuestSsh | 'empty' | null = null,
  loadout: ProvisioningMaterial | null = null,
): Promise<void> {
  await mkdir(fwDir, { recursive: true, mode: 0o700 });
  // certs null (deferred enrollment): empty certificate files and the bootstrap placeholder.
  const files: [string, string][] = [
    ['agent.env', agentEnv(settings)],
    ['ca.pem', certs?.caPem ?? ''],
    ['agent.pem', certs?.certPem ?? ''],
    ['agent-key.pem', certs?.keyPem ?? ''],
    [LOADOUT_FW_CFG, loadout === null ? '' : `${JSON.stringify(loadout)}\n`],
    ...(certs === null ? [[BOOTSTRAP_FW_CFG, bootstrapFwCfgText(null)] as [string, string]] : []),
    ...(ssh === null ? [] : ssh === 'empty' ? SSH_FW_CFG_NAMES.map((n): [string, string] => [n, '']) : guestSshFiles(ssh)),
  ];
  if (ssh === null) for (const n of SSH_FW_CFG_NAMES) await rm(join(fwDir, n), { force: true });
  for (const [name, data] of files) await writeFile(join(fwDir, name), data, { mode: 0o600 });
  const owner = await qemuUser();
  if (owner !== null) {
    await chown(fwDir, owner.uid, owner.gid);
    for (const [name] of files) await chown(join(fwDir, name), owner.uid, owner.gid);
  }
}

/** The bootstrap fw_cfg file's text: `material` (JSON) or a `{}` placeholder, padded with spaces to BOOTSTRAP_FW_CFG_BYTES. */
export function bootstrapFwCfgText(material: string | null): string {
  const body = material ?? '{}';
  const bytes = Buffer.byteLength(body);
  if (bytes > BOOTSTRAP_FW_CFG_BYTES - 1) throw new Error(`bootstrap material of ${bytes} bytes does not fit the fw_cfg file`);
  return body + ' '.repeat(BOOTSTRAP_FW_CFG_BYTES - 1 - bytes) + '\n';
}

/**
 * Puts bootstrap material (the JSON text BootstrapService.stage wrote) into the VM's bootstrap
 * fw_cfg file, 0600 and owned by libvirt-qemu (QEMU opens it at the restore), same size as the
 * placeholder the guest booted with.
 */
export async function writeBootstrapFwCfg(fwDir: string, material: string): Promise<string> {
  const file = join(fwDir, BOOTSTRAP_FW_CFG);
  await writeFile(file, bootstrapFwCfgText(material.trim()), { mode: 0o600 });
  const owner = await qemuUser();
  if (owner !== null) await chown(file, owner.uid, owner.gid);
  return file;
}

export async function removeFwCfg(fwDir: string): Promise<void> {
  await rm(fwDir, { recursive: true, force: true });
}

let qemuUserCache: Promise<{ uid: number; gid: number } | null> | undefined;
/** libvirt's qemu user (Debian: libvirt-qemu), or null when absent or we are not root. */
export function qemuUser(): Promise<{ uid: number; gid: number } | null> {
  qemuUserCache ??= (async () => {
    if (process.getuid?.() !== 0) return null;
    try {
      const uid = Number((await execFileAsync('id', ['-u', 'libvirt-qemu'])).stdout.trim());
      const gid = Number((await execFileAsync('id', ['-g', 'libvirt-qemu'])).stdout.trim());
      return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : null;
    } catch {
      return null;
    }
  })();
  return qemuUserCache;
}

/**
 * The spec for a VM booting a built image: overlay as vda, PVH kernel, fw_cfg settings (with
 * `ssh`, the SSH files too), capped TCG cache; no vsock (hosts without /dev/vhost-vsock cannot
 * start it, and the agent dials TCP).
 */
export function bootSpec(
  image: BootImage,
  disk: string,
  fwDir: string,
  network: string,
  serialLogPath: string,
  ssh = false,
  deferred = false,
): QemuDomainSpec {
  return {
    disks: [{ path: disk, format: 'qcow2' }],
    network,
    serialLogPath,
    kernel: { path: image.kernel, initrdPath: image.initrd, cmdline: image.cmdline },
    fwCfgFiles: fwCfgFiles(fwDir, ssh, deferred),
    tcgCacheMiB: TCG_CACHE_MIB,
    machine: 'pc',
  };
}

/**
 * A free address in the /24 of `gateway` (.10-.250): not the gateway, not in `used`. Null when full.
 */
export function pickAddress(gateway: string, used: ReadonlySet<string>): string | null {
  const m = /^(\d+\.\d+\.\d+)\.(\d+)$/.exec(gateway);
  if (m === null) return null;
  for (let i = 10; i <= 250; i++) {
    const ip = `${m[1]}.${i}`;
    if (ip !== gateway && !used.has(ip)) return ip;
  }
  return null;
}
