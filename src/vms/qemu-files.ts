/**
 * The files a qemu/kvm VM boots from, under <SVC_STATE_DIR>/vms/<name>/ (vm-paths.ts):
 * - disk.qcow2: a qcow2 overlay on the base image (`qemu-img create -f qcow2 -F qcow2 -b BASE
 *   disk.qcow2 <disk_gb>G`), so the base stays read-only and shared;
 * - seed.iso: the cloud-init NoCloud seed (cloud-init.ts; ISO written by iso9660.ts), also kept
 *   unpacked in cloud-init/ for inspection;
 * and the port's QemuDomainSpec pointing at them: virtio disk (overlay, then the seed
 * read-only), one virtio NIC on the libvirt network with the MAC derived from the name,
 * virtio-vsock with a CID derived from the uuid, serial console appended to console.log.
 *
 * These functions only build files and specs; they are unit-tested. Booting a real guest is
 * documented in the README ("A real VM by hand") and exercised by the real-VM issue.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SvcError } from '../core/errors.js';
import type { QemuDomainSpec } from '../hypervisor/port.js';
import { buildCloudInit, type CloudInitInput } from './cloud-init.js';
import { buildIso9660 } from './iso9660.js';
import type { VmPaths } from './vm-paths.js';

const execFileAsync = promisify(execFile);

export interface QemuOptions {
  /** qcow2 base image with the guest OS and sandbox-agent (SVC_VM_BASE_IMAGE). */
  baseImage: string | null;
  /** libvirt network of the VM's NIC. Default `default`. */
  network: string;
  /** sandboxd's gRPC address as guests reach it (host:port), e.g. the network's gateway. */
  agentServer: string;
  /** Default `qemu-img` on PATH. */
  qemuImgPath?: string;
}

/** A guest CID for virtio-vsock from the VM uuid: 3 … 2^31, stable, collisions improbable (libvirt refuses a duplicate at start). */
export function vsockCidFor(uuid: string): number {
  let h = 0x811c9dc5;
  for (const c of uuid.toLowerCase()) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193);
  return 3 + ((h >>> 0) % 0x7ffffffd);
}

/** The port's qemu device spec for a VM (ignored by test-driver hosts). */
export function qemuSpecFor(paths: VmPaths, uuid: string, opts: Pick<QemuOptions, 'network'>): QemuDomainSpec {
  return {
    disks: [
      { path: paths.disk, format: 'qcow2' },
      { path: paths.seed, format: 'raw', readOnly: true },
    ],
    network: opts.network,
    vsockCid: vsockCidFor(uuid),
    serialLogPath: paths.console,
    machine: 'q35',
  };
}

/** argv of the overlay creation (after the qemu-img binary). */
export function overlayArgs(baseImage: string, overlay: string, diskGiB: number, minBytes = 0): string[] {
  // Never smaller than a raw base: a truncated ext4 no longer mounts (EINVAL in the guest).
  const size = minBytes > diskGiB * 1024 ** 3 ? String(minBytes) : `${diskGiB}G`;
  return ['create', '-f', 'qcow2', '-F', baseFormat(baseImage), '-b', baseImage, overlay, size];
}

/** Format of a base image by its name: qcow2, or raw for a built image's disk.ext4 (and .raw/.img). */
export function baseFormat(baseImage: string): 'qcow2' | 'raw' {
  return baseImage.endsWith('.qcow2') ? 'qcow2' : 'raw';
}

/** The seed image bytes, and the three documents (also written unpacked). */
export function buildSeed(input: CloudInitInput, date?: Date): { iso: Buffer; userData: string; metaData: string; networkConfig: string } {
  const seed = buildCloudInit(input);
  const iso = buildIso9660({
    volumeId: 'cidata',
    files: [
      { name: 'user-data', data: Buffer.from(seed.userData) },
      { name: 'meta-data', data: Buffer.from(seed.metaData) },
      { name: 'network-config', data: Buffer.from(seed.networkConfig) },
    ],
    ...(date !== undefined ? { date } : {}),
  });
  return { iso, ...seed };
}

/** Writes seed.iso and cloud-init/ (the key-bearing user-data is 0600). */
export async function writeSeed(paths: VmPaths, input: CloudInitInput): Promise<void> {
  const seed = buildSeed(input);
  await mkdir(paths.cloudInit, { recursive: true, mode: 0o700 });
  await writeFile(join(paths.cloudInit, 'user-data'), seed.userData, { mode: 0o600 });
  await writeFile(join(paths.cloudInit, 'meta-data'), seed.metaData, { mode: 0o644 });
  await writeFile(join(paths.cloudInit, 'network-config'), seed.networkConfig, { mode: 0o644 });
  await writeFile(paths.seed, seed.iso, { mode: 0o600 });
}

/** Creates the overlay disk. PROVISIONING_ERROR when no base image is configured or qemu-img fails. */
export async function createOverlay(paths: VmPaths, diskGiB: number, opts: QemuOptions, timeoutMs: number): Promise<void> {
  if (opts.baseImage === null) {
    throw new SvcError(
      'PROVISIONING_ERROR',
      'no base image is configured for qemu VMs (set SVC_VM_BASE_IMAGE to the disk.ext4 of `sandboxd image build`, or a qcow2 image with sandbox-agent installed)',
    );
  }
  // 0711: QEMU (user libvirt-qemu) must traverse to the overlay; nothing here is listable.
  await mkdir(paths.dir, { recursive: true, mode: 0o711 });
  await chmod(paths.dir, 0o711);
  await rm(paths.disk, { force: true });
  try {
    const minBytes = baseFormat(opts.baseImage) === 'raw' ? (await stat(opts.baseImage)).size : 0;
    await execFileAsync(opts.qemuImgPath ?? 'qemu-img', overlayArgs(opts.baseImage, paths.disk, diskGiB, minBytes), { timeout: timeoutMs });
  } catch (err) {
    const e = err as { stderr?: string; message?: string };
    throw new SvcError(
      'PROVISIONING_ERROR',
      `qemu-img could not create the overlay disk: ${(e.stderr ?? e.message ?? String(err)).trim().slice(0, 500)}`,
    );
  }
}
