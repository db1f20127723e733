/**
 * qemu VMs booted from a `sandboxd image build` image (src/image/): direct PVH kernel boot, the
 * image disk as a copy-on-write overlay, a static address on the isolated network, and the
 * agent's settings and mTLS files handed over through fw_cfg files (QEMU reads the files named
 * in the domain XML; only paths appear on its command line, never contents).
 *
 * Files per VM under <vm>/fwcfg/ (0700; owned by the user QEMU runs as, libvirt-qemu, when it
 * exists, because QEMU opens them itself): agent.env, ca.pem, agent.pem, agent-key.pem.
 */
import { chown, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { dirname, join } from 'node:path';
import { FW_CFG_PREFIX } from '../image/guest-init.js';
import type { QemuDomainSpec } from '../hypervisor/port.js';

const execFileAsync = promisify(execFile);

/** A built image found next to SVC_VM_BASE_IMAGE (its manifest.json). */
export interface BootImage {
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
    return { kernel: join(dir, m.files.kernel), initrd: join(dir, m.files.initrd), cmdline: m.cmdline, disk: baseImage };
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
  };
  return Object.entries(lines)
    .map(([k, v]) => {
      if (!SAFE.test(v)) throw new Error(`${k} has characters the guest cannot take: ${v.slice(0, 64)}`);
      return `${k}=${v}\n`;
    })
    .join('');
}

/** fw_cfg name → host file for a VM's folder. */
export function fwCfgFiles(fwDir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of ['agent.env', 'ca.pem', 'agent.pem', 'agent-key.pem']) out[`${FW_CFG_PREFIX}/${f}`] = join(fwDir, f);
  return out;
}

/** Writes the fw_cfg files (0600, handed to libvirt-qemu when that user exists). */
export async function writeFwCfg(
  fwDir: string,
  settings: GuestSettings,
  certs: { caPem: string; certPem: string; keyPem: string },
): Promise<void> {
  await mkdir(fwDir, { recursive: true, mode: 0o700 });
  const files: [string, string][] = [
    ['agent.env', agentEnv(settings)],
    ['ca.pem', certs.caPem],
    ['agent.pem', certs.certPem],
    ['agent-key.pem', certs.keyPem],
  ];
  for (const [name, data] of files) await writeFile(join(fwDir, name), data, { mode: 0o600 });
  const owner = await qemuUser();
  if (owner !== null) {
    await chown(fwDir, owner.uid, owner.gid);
    for (const [name] of files) await chown(join(fwDir, name), owner.uid, owner.gid);
  }
}

export async function removeFwCfg(fwDir: string): Promise<void> {
  await rm(fwDir, { recursive: true, force: true });
}

let qemuUserCache: Promise<{ uid: number; gid: number } | null> | undefined;
/** libvirt's qemu user (Debian: libvirt-qemu), or null when absent or we are not root. */
function qemuUser(): Promise<{ uid: number; gid: number } | null> {
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

/** The spec for a VM booting a built image: overlay as vda, PVH kernel, fw_cfg settings, capped TCG cache; no vsock (hosts without /dev/vhost-vsock cannot start it, and the agent dials TCP). */
export function bootSpec(image: BootImage, disk: string, fwDir: string, network: string, serialLogPath: string): QemuDomainSpec {
  return {
    disks: [{ path: disk, format: 'qcow2' }],
    network,
    serialLogPath,
    kernel: { path: image.kernel, initrdPath: image.initrd, cmdline: image.cmdline },
    fwCfgFiles: fwCfgFiles(fwDir),
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
