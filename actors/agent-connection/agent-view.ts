/**
 * Pure conversions from decoded agent messages to the JSON shapes the main thread serves: the
 * spec's Agent.metrics and Agent.system_info (integers where the spec says integer, load_avg
 * exactly three numbers), registration facts with bounded strings, and the command result label.
 */
import type { v1 } from '../../proto/index.js';
import type { AgentMetricsView, AgentSystemInfoView, CommandResultLabel } from '../protocol/agent-frames.js';

/** Longest string kept from an agent's registration (hostname, labels, …). */
export const kMaxFieldChars = 256;
/** Most labels kept from a registration. */
export const kMaxLabels = 64;

/** A string field of an untrusted message, bounded. */
export function clip(value: string | null | undefined, maxChars = kMaxFieldChars): string {
  const s = value ?? '';
  return s.length > maxChars ? s.slice(0, maxChars) : s;
}

/** A non-negative integer from a proto number field (64-bit fields are numbers, see proto/README.md). */
export function nonNegativeInt(value: number | null | undefined): number {
  const n = Number(value ?? 0);
  return Number.isFinite(n) && n > 0 ? Math.trunc(n) : 0;
}

/** A float32 field, rounded to 0.01 (float32 carries noise like 12.300000190734863). */
function round2(value: number | null | undefined): number {
  const n = Number(value ?? 0);
  return Number.isFinite(n) ? Math.round(n * 100) / 100 : 0;
}

/** The spec's Agent.metrics from a Metrics message. */
export function metricsView(m: v1.IMetrics): AgentMetricsView {
  const load = m.loadAvg ?? [];
  return {
    cpu_percent: round2(m.cpuPercent),
    memory_used_bytes: nonNegativeInt(m.memoryUsedBytes),
    memory_total_bytes: nonNegativeInt(m.memoryTotalBytes),
    disk_used_bytes: nonNegativeInt(m.diskUsedBytes),
    disk_total_bytes: nonNegativeInt(m.diskTotalBytes),
    load_avg: [round2(load[0]), round2(load[1]), round2(load[2])],
    uptime_seconds: nonNegativeInt(m.uptimeSeconds),
  };
}

/** The spec's Agent.system_info, or undefined when the registration carried none. */
export function systemInfoView(s: v1.ISystemInfo | null | undefined): AgentSystemInfoView | undefined {
  if (s === null || s === undefined) return undefined;
  return {
    os: clip(s.os),
    kernel: clip(s.kernel),
    cpu_cores: nonNegativeInt(s.cpuCores),
    memory_bytes: nonNegativeInt(s.memoryBytes),
    disk_bytes: nonNegativeInt(s.diskBytes),
  };
}

/** Registration labels, bounded in count and length. */
export function labelsView(labels: Record<string, string> | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  let n = 0;
  for (const [k, v] of Object.entries(labels ?? {})) {
    if (n++ >= kMaxLabels) break;
    out[clip(k, 128)] = clip(v);
  }
  return out;
}

/**
 * svc_commands_by_result{result} of a CommandResult:
 *   timeout  a timer ended it (timed_out_by set)
 *   error    it could not be started (exit −1)
 *   success  exit 0
 *   killed   a signal ended it (exit 129–192, i.e. 128 + signal)
 *   failure  any other exit status
 */
export function classifyResult(r: { exitCode: number; timedOutBy: string }): CommandResultLabel {
  if (r.timedOutBy !== '') return 'timeout';
  if (r.exitCode < 0) return 'error';
  if (r.exitCode === 0) return 'success';
  if (r.exitCode > 128 && r.exitCode <= 128 + 64) return 'killed';
  return 'failure';
}
