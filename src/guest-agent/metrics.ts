/**
 * Periodic machine metrics for Heartbeat and Metrics. CPU usage is a delta between two samples
 * of /proc/stat (all CPUs; busy = everything but idle and iowait), falling back to os.cpus()
 * times where /proc is missing. Memory used = total − MemAvailable (what `free` calls available
 * is reclaimable, so it is not "used"), falling back to total − os.freemem().
 */
import { readFile } from 'node:fs/promises';
import { cpus, freemem, loadavg, totalmem, uptime } from 'node:os';
import { diskUsage } from './system-info.js';

export interface MetricsSample {
  readonly timestampMs: number;
  /** Busy share of all CPUs since the previous sample, 0-100. */
  readonly cpuPercent: number;
  readonly memoryUsedBytes: number;
  readonly memoryTotalBytes: number;
  readonly diskUsedBytes: number;
  readonly diskTotalBytes: number;
  /** 1, 5 and 15 minute load averages. */
  readonly loadAvg: readonly [number, number, number];
  /** Machine uptime, in seconds. */
  readonly uptimeSeconds: number;
}

interface CpuTimes {
  readonly busy: number;
  readonly total: number;
}

async function procStatTimes(): Promise<CpuTimes | undefined> {
  const text = await readFile('/proc/stat', 'utf8').catch(() => undefined);
  const line = text?.split('\n', 1)[0];
  if (!line?.startsWith('cpu ')) return undefined;
  // user nice system idle iowait irq softirq steal (guest times are already in user/nice)
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (f.length < 4 || f.some((n) => !Number.isFinite(n))) return undefined;
  const total = f.reduce((a, b) => a + b, 0);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  return { busy: total - idle, total };
}

function osCpuTimes(): CpuTimes {
  let busy = 0;
  let total = 0;
  for (const c of cpus()) {
    const t = c.times;
    const all = t.user + t.nice + t.sys + t.idle + t.irq;
    total += all;
    busy += all - t.idle;
  }
  return { busy, total };
}

async function memoryUsedBytes(): Promise<number> {
  const total = totalmem();
  const text = await readFile('/proc/meminfo', 'utf8').catch(() => undefined);
  const m = text ? /^MemAvailable:\s+(\d+)\s+kB/m.exec(text) : null;
  const available = m?.[1] !== undefined ? Number(m[1]) * 1024 : freemem();
  return Math.max(0, total - available);
}

/** Samples metrics; keeps the previous CPU times to compute a percentage over the interval. */
export class MetricsSampler {
  readonly #workDir: string;
  #prev: CpuTimes | undefined;

  /** @param workDir the filesystem disk_used/disk_total describe. */
  constructor(workDir: string) {
    this.#workDir = workDir;
  }

  async sample(): Promise<MetricsSample> {
    const [times, memUsed, disk] = await Promise.all([
      procStatTimes().then((t) => t ?? osCpuTimes()),
      memoryUsedBytes(),
      diskUsage(this.#workDir),
    ]);
    const prev = this.#prev;
    this.#prev = times;
    let cpuPercent = 0;
    if (prev && times.total > prev.total) {
      cpuPercent = (100 * (times.busy - prev.busy)) / (times.total - prev.total);
    } else if (!prev && times.total > 0) {
      cpuPercent = (100 * times.busy) / times.total; // since boot, until there is an interval
    }
    const [l1, l5, l15] = loadavg();
    return {
      timestampMs: Date.now(),
      cpuPercent: Math.min(100, Math.max(0, Math.round(cpuPercent * 10) / 10)),
      memoryUsedBytes: memUsed,
      memoryTotalBytes: totalmem(),
      diskUsedBytes: disk.usedBytes,
      diskTotalBytes: disk.totalBytes,
      loadAvg: [l1 ?? 0, l5 ?? 0, l15 ?? 0],
      uptimeSeconds: Math.floor(uptime()),
    };
  }
}
