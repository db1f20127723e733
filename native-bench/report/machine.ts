/**
 * Where a bench run happened, for the HTML report (report-html.ts) and for `--machine`, which
 * prints it as one `{"machine":{...}}` line so a saved NDJSON file can carry it:
 *
 *   npm run --silent bench -- --machine > run.ndjson && npm run --silent bench >> run.ndjson
 *
 * The accelerator is what real guests would get here (src/hypervisor/accelerator.ts: KVM only with
 * /dev/kvm backed by hardware virtualisation, TCG otherwise), since vm-real and boot times depend
 * on it. The commit is the checkout's HEAD, with `dirty` when the work tree has changes.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { arch, cpus, freemem, loadavg, platform, release, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { detectAccelerator } from '../../src/hypervisor/accelerator.js';
import type { JsonValue } from '../types.js';

/** The repository root (dist/native-bench/report → three levels up). */
const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export interface MachineInfo {
  /** Logical CPUs Node sees. */
  readonly cores: number;
  readonly cpuModel: string;
  readonly memoryMiB: number;
  readonly freeMemoryMiB: number;
  /** 1, 5 and 15 minute load averages when the run started: a loaded machine explains noisy figures. */
  readonly loadAverage: readonly number[];
  /** e.g. v20.20.2 */
  readonly node: string;
  /** e.g. "linux 6.1.0 x64" */
  readonly os: string;
  /** kvm or tcg: what a real guest gets here. */
  readonly accelerator: 'kvm' | 'tcg';
  readonly acceleratorReason: string;
  /** Full commit hash of the checkout, or null outside a git work tree. */
  readonly commit: string | null;
  /** The commit's subject line. */
  readonly commitSubject: string | null;
  /** True when the work tree had uncommitted changes to tracked files. */
  readonly dirty: boolean;
  /** ISO time the information was taken. */
  readonly takenAt: string;
}

function git(args: readonly string[]): string | null {
  const r = spawnSync('git', args, { cwd: repoRoot, encoding: 'utf8', timeout: 5000 });
  return r.status === 0 ? r.stdout.trim() : null;
}

function acceleratorNow(): { accelerator: 'kvm' | 'tcg'; reason: string } {
  const choice = detectAccelerator();
  if (choice.accelerator !== 'kvm') return choice;
  try {
    accessSync('/dev/kvm', constants.R_OK | constants.W_OK);
    return choice;
  } catch {
    return { accelerator: 'tcg', reason: '/dev/kvm is not readable and writable by this user' };
  }
}

/** Describes this machine and checkout now. */
export function machineInfo(): MachineInfo {
  const cpuList = cpus();
  const acc = acceleratorNow();
  const commit = git(['rev-parse', 'HEAD']);
  return {
    cores: cpuList.length,
    cpuModel: cpuList[0]?.model.trim() ?? 'unknown',
    memoryMiB: Math.round(totalmem() / 2 ** 20),
    freeMemoryMiB: Math.round(freemem() / 2 ** 20),
    loadAverage: loadavg().map((l) => Math.round(l * 100) / 100),
    node: process.version,
    os: `${platform()} ${release()} ${arch()}`,
    accelerator: acc.accelerator,
    acceleratorReason: acc.reason,
    commit,
    commitSubject: commit === null ? null : git(['log', '-1', '--format=%s']),
    dirty: commit !== null && (git(['status', '--porcelain', '--untracked-files=no']) ?? '') !== '',
    takenAt: new Date().toISOString(),
  };
}

/** The `{"machine":{...}}` record as JSON (one NDJSON line without the newline). */
export function machineRecord(m: MachineInfo): string {
  return JSON.stringify({ machine: m as unknown as JsonValue });
}

/** Reads a machine record's object back, tolerating missing fields (older or hand-written files). */
export function machineFromRecord(v: unknown): Partial<MachineInfo> | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  return v;
}
