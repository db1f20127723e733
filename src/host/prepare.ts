/**
 * Host preparation for qemu VMs, idempotent: the Debian packages (the host step of
 * src/setup/programs.mjs), libvirtd and virtlogd running (by hand when PID 1 is not systemd, as
 * on CI containers and Firecracker hosts), libvirt's dnsmasq folder (normally made by
 * systemd-tmpfiles), and an isolated libvirt network: a bridge with the host's address and no
 * <forward>, so guests reach only the host (no NAT, no DHCP).
 * Anything it cannot do is refused with the reason; it never changes ip_forward or firewall
 * policy itself (libvirt adds its REJECT rules for isolated networks).
 */
import { existsSync, statSync } from 'node:fs';
import { chmod, chown, mkdir, readFile } from 'node:fs/promises';
import { ensureStepPrograms, run } from '../image/run.js';
import { detectAccelerator } from '../hypervisor/accelerator.js';

export { detectAccelerator };

export interface NetworkSpec {
  /** libvirt network name. Default sandboxd-iso. */
  name: string;
  /** Bridge device, at most 15 characters. Default sbxbr0. */
  bridge: string;
  /** The host's address on the bridge (guests dial it); a /24. Default 192.168.213.1. */
  hostAddress: string;
}

export const DEFAULT_NETWORK: NetworkSpec = { name: 'sandboxd-iso', bridge: 'sbxbr0', hostAddress: '192.168.213.1' };

export interface PrepareOptions {
  network?: NetworkSpec;
  /** Install missing packages with apt-get (root only). Default true. */
  install?: boolean;
  log?: (line: string) => void;
}

export interface PrepareResult {
  /** Daemons this call started (pid by name), so a test can stop exactly those. */
  started: Record<string, number>;
  network: NetworkSpec;
  accelerator: 'kvm' | 'tcg';
  acceleratorReason: string;
}

/** Makes the host ready; rejects naming what it could not do. */
export async function prepareHost(o: PrepareOptions = {}): Promise<PrepareResult> {
  const log = o.log ?? (() => undefined);
  const net = o.network ?? DEFAULT_NETWORK;
  if (
    !/^[A-Za-z0-9_.-]{1,64}$/.test(net.name) ||
    !/^[A-Za-z0-9_.-]{1,15}$/.test(net.bridge) ||
    !/^\d+\.\d+\.\d+\.\d+$/.test(net.hostAddress)
  ) {
    throw new Error('network name, bridge (≤15 characters) or host address is malformed');
  }
  const root = process.getuid?.() === 0;
  // Before anything below spawns one of them (the guest image's tools are image build's).
  await ensureStepPrograms('host', { install: o.install !== false, log });
  if (!root) throw new Error('host prepare needs root (libvirt qemu:///system, bridges and iptables)');
  await mkdir('/var/lib/libvirt/dnsmasq', { recursive: true });
  await fixKvmNode(log);
  const started: Record<string, number> = {};
  const systemd = (await readFile('/proc/1/comm', 'utf8').catch(() => '')).trim() === 'systemd';
  for (const d of ['virtlogd', 'libvirtd']) {
    const pidFile = `/run/${d}.pid`;
    if (await alive(pidFile)) {
      log(`${d} is running`);
      continue;
    }
    if (systemd) await run('systemctl', ['start', d]);
    else await run(d, ['-d'], { timeoutMs: 30_000 });
    const pid = await waitPid(pidFile, 10_000);
    if (pid === null) throw new Error(`${d} did not start (no live ${pidFile})`);
    started[d] = pid;
    log(`started ${d} (pid ${pid})`);
  }
  await waitForLibvirt(30_000);
  // The first capabilities query probes every qemu-system binary (seconds each, minutes on a busy
  // 2-core host under TCG); pay it here, not inside the first VM define's budget. Cached by libvirt.
  const tc = Date.now();
  await run('virsh', ['-c', 'qemu:///system', 'capabilities'], { timeoutMs: 600_000 });
  log(`libvirt capabilities ready in ${Date.now() - tc} ms`);
  await ensureNetwork(net, log);
  const acc = detectAccelerator();
  log(`accelerator: ${acc.accelerator} (${acc.reason})`);
  return { started, network: net, accelerator: acc.accelerator, acceleratorReason: acc.reason };
}

/**
 * /dev/kvm as Debian's udev rule leaves it (root:kvm 0660). Without udev it can be root-only: then
 * libvirt judges KVM unusable for its qemu user while its root-run probe finds KVM, so it finds its
 * capability cache stale on every call and re-probes QEMU endlessly (defines then time out).
 */
async function fixKvmNode(log: (l: string) => void): Promise<void> {
  if (!existsSync('/dev/kvm')) return;
  const gid = Number((await run('getent', ['group', 'kvm']).catch(() => Buffer.from(''))).toString().split(':')[2]);
  if (!Number.isInteger(gid)) return;
  const st = statSync('/dev/kvm');
  if (st.gid === gid && (st.mode & 0o060) === 0o060) return;
  await chown('/dev/kvm', 0, gid);
  await chmod('/dev/kvm', 0o660);
  log('set /dev/kvm to root:kvm 0660 (what udev does on Debian), so libvirt keeps its capability cache');
}

/** The libvirt XML of an isolated network: no <forward>, no DHCP/DNS; the host's address on the bridge. */
export function isolatedNetworkXml(n: NetworkSpec): string {
  return (
    `<network><name>${n.name}</name><bridge name='${n.bridge}' stp='off' delay='0'/><dns enable='no'/>` +
    `<ip address='${n.hostAddress}' netmask='255.255.255.0'/></network>\n`
  );
}

async function ensureNetwork(n: NetworkSpec, log: (l: string) => void): Promise<void> {
  const info = await virsh(['net-info', n.name]).catch(() => null);
  if (info === null) {
    const xmlPath = `/run/${n.name}.net.xml`;
    const { writeFile, rm } = await import('node:fs/promises');
    await writeFile(xmlPath, isolatedNetworkXml(n));
    try {
      await virsh(['net-define', xmlPath]);
    } finally {
      await rm(xmlPath, { force: true });
    }
    log(`defined network ${n.name} (${n.bridge}, ${n.hostAddress}/24, isolated)`);
  } else if (/<forward/.test(await virsh(['net-dumpxml', n.name]))) {
    throw new Error(
      `network ${n.name} exists and forwards traffic (NAT/route); sandboxd wants an isolated one: pick another name or remove it`,
    );
  }
  if (!/Active:\s+yes/.test(info ?? '')) {
    await virsh(['net-start', n.name]);
    log(`started network ${n.name}`);
  }
  await virsh(['net-autostart', n.name]).catch(() => undefined);
}

/** Removes a network this module defined (tests). */
/**
 * Removes the network (stopped and undefined). With `bridge`, the bridge device goes too even
 * when libvirtd no longer answers (a test whose daemon died left one behind).
 */
export async function removeNetwork(name: string, bridge?: string): Promise<void> {
  await virsh(['net-destroy', name]).catch(() => undefined);
  await virsh(['net-undefine', name]).catch(() => undefined);
  if (bridge !== undefined && existsSync(`/sys/class/net/${bridge}`)) await run('ip', ['link', 'delete', bridge]).catch(() => undefined);
}

async function virsh(args: string[]): Promise<string> {
  return (await run('virsh', ['-c', 'qemu:///system', ...args], { timeoutMs: 60_000 })).toString();
}

async function waitForLibvirt(timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      await virsh(['version']);
      return;
    } catch (err) {
      if (Date.now() > end) throw new Error(`libvirtd does not answer: ${(err as Error).message}`, { cause: err });
      await new Promise((r) => setTimeout(r, 200).unref());
    }
  }
}

async function readPid(pidFile: string): Promise<number | null> {
  const pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim());
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

async function alive(pidFile: string): Promise<boolean> {
  const pid = await readPid(pidFile);
  if (pid === null) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitPid(pidFile: string, timeoutMs: number): Promise<number | null> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await alive(pidFile)) return readPid(pidFile);
    await new Promise((r) => setTimeout(r, 100).unref());
  }
  return null;
}
