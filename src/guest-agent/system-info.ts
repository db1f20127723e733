/**
 * What the agent reports about its machine at registration (SystemInfo, hostname, ip_address),
 * read from the system each time it registers.
 */
import { readFile, statfs } from 'node:fs/promises';
import { cpus, hostname, networkInterfaces, release, totalmem, type } from 'node:os';

export interface SystemInfoSample {
  /** os.type() plus the distribution (PRETTY_NAME of /etc/os-release) when known: "Linux Debian GNU/Linux 12 (bookworm)". */
  readonly os: string;
  /** Kernel release (uname -r). */
  readonly kernel: string;
  readonly cpuCores: number;
  readonly memoryBytes: number;
  /** Size of the filesystem holding the work dir, in bytes (0 if unknown). */
  readonly diskBytes: number;
  readonly hostname: string;
  /** First non-internal IPv4 address ('' when none). */
  readonly ipAddress: string;
}

/** Total and used bytes of the filesystem holding `path` (zeros when it cannot be read). */
export async function diskUsage(path: string): Promise<{ totalBytes: number; usedBytes: number }> {
  try {
    const s = await statfs(path);
    const totalBytes = s.blocks * s.bsize;
    return { totalBytes, usedBytes: (s.blocks - s.bfree) * s.bsize };
  } catch {
    return { totalBytes: 0, usedBytes: 0 };
  }
}

/** PRETTY_NAME from os-release(5), or undefined. */
export async function distribution(
  osReleasePaths: readonly string[] = ['/etc/os-release', '/usr/lib/os-release'],
): Promise<string | undefined> {
  for (const p of osReleasePaths) {
    const text = await readFile(p, 'utf8').catch(() => undefined);
    if (text === undefined) continue;
    const m = /^PRETTY_NAME=(.*)$/m.exec(text);
    const v = m?.[1]?.trim().replace(/^(["'])(.*)\1$/, '$2');
    if (v) return v;
  }
  return undefined;
}

/** First IPv4 address not on a loopback/internal interface ('' when none). */
export function primaryIPv4(): string {
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '';
}

/** Reads SystemInfo for registration. @param workDir the filesystem whose size is disk_bytes. */
export async function readSystemInfo(workDir: string): Promise<SystemInfoSample> {
  const [distro, disk] = await Promise.all([distribution(), diskUsage(workDir)]);
  return {
    os: distro ? `${type()} ${distro}` : type(),
    kernel: release(),
    cpuCores: Math.max(1, cpus().length),
    memoryBytes: totalmem(),
    diskBytes: disk.totalBytes,
    hostname: hostname(),
    ipAddress: primaryIPv4(),
  };
}
