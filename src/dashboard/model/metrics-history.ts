/**
 * The last minutes of each agent's metrics, for the sparklines. Samples come from the WebSocket
 * `metrics` messages and from the agents list (its `metrics` object, stamped with the agent's
 * last_heartbeat); both may carry the same sample, so a sample not newer than the last one kept
 * is ignored. Memory is bounded: at most `maxSamples` per agent and `windowMs` of age.
 */

export interface MetricsSample {
  /** Unix ms of the measurement. */
  readonly atMs: number;
  readonly cpuPercent: number;
  readonly memoryUsedBytes: number;
  readonly memoryTotalBytes: number;
}

export interface MetricsHistoryOptions {
  /** Oldest sample kept, relative to the newest (ms). Default 10 minutes. */
  windowMs?: number;
  /** Samples kept per agent. Default 600 (one a second for the default window). */
  maxSamples?: number;
}

export class MetricsHistory {
  readonly #byAgent = new Map<string, MetricsSample[]>();
  readonly #windowMs: number;
  readonly #maxSamples: number;

  constructor(opts: MetricsHistoryOptions = {}) {
    this.#windowMs = opts.windowMs ?? 10 * 60_000;
    this.#maxSamples = opts.maxSamples ?? 600;
  }

  /**
   * Adds a sample; returns false (and keeps nothing) when it is not newer than the last one. A
   * sample with cpuPercent NaN is a gap (the agent was away): the chart breaks its line there.
   */
  push(agentId: string, sample: MetricsSample): boolean {
    if (!Number.isFinite(sample.atMs)) return false;
    let list = this.#byAgent.get(agentId);
    if (list === undefined) this.#byAgent.set(agentId, (list = []));
    const last = list[list.length - 1];
    if (last !== undefined && sample.atMs <= last.atMs) return false;
    list.push(sample);
    const oldest = sample.atMs - this.#windowMs;
    let drop = 0;
    while (drop < list.length && (list[drop] as MetricsSample).atMs < oldest) drop++;
    drop = Math.max(drop, list.length - this.#maxSamples);
    if (drop > 0) list.splice(0, drop);
    return true;
  }

  /** Samples of an agent, oldest first (empty when none). */
  samples(agentId: string): readonly MetricsSample[] {
    return this.#byAgent.get(agentId) ?? [];
  }

  /** Forgets agents that are no longer listed. */
  retain(agentIds: ReadonlySet<string>): void {
    for (const id of this.#byAgent.keys()) if (!agentIds.has(id)) this.#byAgent.delete(id);
  }

  get agentCount(): number {
    return this.#byAgent.size;
  }
}

/** CPU series (percent) of a list of samples. */
export function cpuSeries(samples: readonly MetricsSample[]): number[] {
  return samples.map((s) => s.cpuPercent);
}

/** Memory-used series as a percentage of the total (NaN where the total is unknown). */
export function memorySeries(samples: readonly MetricsSample[]): number[] {
  return samples.map((s) => (s.memoryTotalBytes > 0 ? (s.memoryUsedBytes / s.memoryTotalBytes) * 100 : Number.NaN));
}
