/**
 * The dashboard's view of the agents: the polled list (GET /api/v1/agents, the truth about which
 * agents exist) merged with the live WebSocket `metrics` and `agent_status` messages (fresher, in
 * between polls). Rule: the newest information wins. Metrics carry their measurement time, so
 * the newer measurement is kept. Status changes (Stale, Disconnected) happen on the server without
 * a new timestamp, so for status the poll is the truth unless a live message was received after
 * the poll was sent (local receipt times, no clock skew involved).
 *
 * The metrics history behind the sparklines is what this page observed, on the page's clock:
 * one sample per live message (at its arrival) or, while no live message came for
 * {@link LIVE_FRESH_MS}, one per poll (at its send time; a Disconnected agent adds a gap).
 *
 * Changes are reported as a set of agent ids so a view can patch only the rows that changed
 * (200 agents streaming metrics must not re-render the whole table per message).
 */
import type { AgentStatusMessage, MetricsMessage } from './live-messages.js';
import { MetricsHistory } from './metrics-history.js';

/** While live metrics arrived this recently (ms), polled ones are not added to the history. */
export const LIVE_FRESH_MS = 10_000;

/** The Agent fields of spec part 2 that the dashboard reads. */
export interface AgentInput {
  readonly id: string;
  readonly hostname: string;
  readonly ip_address: string;
  readonly status: string;
  readonly connected_at: number;
  readonly last_heartbeat: number;
  readonly metrics?: {
    readonly cpu_percent: number;
    readonly memory_used_bytes: number;
    readonly memory_total_bytes: number;
    readonly disk_used_bytes: number;
    readonly disk_total_bytes: number;
    readonly load_avg: readonly number[];
    readonly uptime_seconds: number;
  };
  readonly system_info?: {
    readonly os: string;
    readonly kernel: string;
    readonly cpu_cores: number;
    readonly memory_bytes: number;
    readonly disk_bytes: number;
  };
}

export interface AgentLiveMetrics {
  readonly cpuPercent: number;
  readonly memoryUsedBytes: number;
  readonly memoryTotalBytes: number;
  readonly diskUsedBytes: number;
  readonly diskTotalBytes: number;
  readonly loadAvg: readonly number[];
  /** Unix ms of the measurement. */
  readonly atMs: number;
}

export interface AgentRow {
  readonly agent: AgentInput;
  readonly status: string;
  /** Local time (ms) when the status was received: the poll's send time, or the live message's arrival. */
  readonly statusReceivedAtMs: number;
  readonly metrics: AgentLiveMetrics | null;
}

export class FleetAgents {
  readonly #rows = new Map<string, AgentRow>();
  /** Local time of the last live metrics message per agent. */
  readonly #liveAtMs = new Map<string, number>();
  readonly history: MetricsHistory;
  #loaded = false;

  constructor(history = new MetricsHistory()) {
    this.history = history;
  }

  /** True once a list has been applied (before that, "no agents" means "not loaded yet"). */
  get loaded(): boolean {
    return this.#loaded;
  }

  /**
   * Replaces the set of agents with a polled list; `requestedAtMs` is the local time the request
   * was sent. Returns the ids whose row changed or went away.
   */
  applyList(agents: readonly AgentInput[], requestedAtMs: number): Set<string> {
    this.#loaded = true;
    const changed = new Set<string>();
    const seen = new Set<string>();
    for (const a of agents) {
      seen.add(a.id);
      const prev = this.#rows.get(a.id);
      const polled = polledMetrics(a);
      const metrics =
        prev?.metrics !== undefined && prev.metrics !== null && (polled === null || prev.metrics.atMs > polled.atMs)
          ? prev.metrics
          : polled;
      const keepLiveStatus = prev !== undefined && prev.statusReceivedAtMs > requestedAtMs;
      const row: AgentRow = {
        agent: a,
        status: keepLiveStatus ? prev.status : a.status,
        statusReceivedAtMs: keepLiveStatus ? prev.statusReceivedAtMs : requestedAtMs,
        metrics,
      };
      if (requestedAtMs - (this.#liveAtMs.get(a.id) ?? Number.NEGATIVE_INFINITY) > LIVE_FRESH_MS) {
        if (row.status === 'Disconnected')
          this.history.push(a.id, { atMs: requestedAtMs, cpuPercent: Number.NaN, memoryUsedBytes: 0, memoryTotalBytes: 0 });
        else if (metrics !== null)
          this.history.push(a.id, {
            atMs: requestedAtMs,
            cpuPercent: metrics.cpuPercent,
            memoryUsedBytes: metrics.memoryUsedBytes,
            memoryTotalBytes: metrics.memoryTotalBytes,
          });
      }
      if (prev === undefined || !sameRow(prev, row)) changed.add(a.id);
      this.#rows.set(a.id, row);
    }
    for (const id of [...this.#rows.keys()]) {
      if (!seen.has(id)) {
        this.#rows.delete(id);
        this.#liveAtMs.delete(id);
        changed.add(id);
      }
    }
    this.history.retain(seen);
    return changed;
  }

  /** Applies a live `metrics` message received at local time `receivedAtMs`; false when the agent is not listed or the data is older. */
  applyMetrics(m: MetricsMessage, receivedAtMs: number): boolean {
    const prev = this.#rows.get(m.agent_id);
    if (prev === undefined) return false;
    if (prev.metrics !== null && prev.metrics.atMs >= m.timestamp) return false;
    const metrics: AgentLiveMetrics = {
      cpuPercent: m.cpu_percent,
      memoryUsedBytes: m.memory_used_bytes,
      memoryTotalBytes: m.memory_total_bytes,
      diskUsedBytes: m.disk_used_bytes,
      diskTotalBytes: m.disk_total_bytes,
      loadAvg: m.load_avg,
      atMs: m.timestamp,
    };
    this.#rows.set(m.agent_id, { ...prev, metrics });
    this.#liveAtMs.set(m.agent_id, receivedAtMs);
    this.history.push(m.agent_id, {
      atMs: receivedAtMs,
      cpuPercent: m.cpu_percent,
      memoryUsedBytes: m.memory_used_bytes,
      memoryTotalBytes: m.memory_total_bytes,
    });
    return true;
  }

  /** Applies a live `agent_status` message received at local time `receivedAtMs`; false when the agent is unknown or nothing changed. */
  applyStatus(m: AgentStatusMessage, receivedAtMs: number): boolean {
    const prev = this.#rows.get(m.agent_id);
    if (prev === undefined) return false;
    this.#rows.set(m.agent_id, { ...prev, status: m.status, statusReceivedAtMs: receivedAtMs });
    return m.status !== prev.status;
  }

  get(id: string): AgentRow | undefined {
    return this.#rows.get(id);
  }

  /** Rows sorted by id (stable order: rows must not jump around while metrics stream). */
  rows(): AgentRow[] {
    return [...this.#rows.values()].sort((a, b) => (a.agent.id < b.agent.id ? -1 : a.agent.id > b.agent.id ? 1 : 0));
  }

  get size(): number {
    return this.#rows.size;
  }

  /** Agents per status (only statuses with at least one agent). */
  countByStatus(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const r of this.#rows.values()) counts.set(r.status, (counts.get(r.status) ?? 0) + 1);
    return counts;
  }
}

function polledMetrics(a: AgentInput): AgentLiveMetrics | null {
  const m = a.metrics;
  if (m === undefined) return null;
  return {
    cpuPercent: m.cpu_percent,
    memoryUsedBytes: m.memory_used_bytes,
    memoryTotalBytes: m.memory_total_bytes,
    diskUsedBytes: m.disk_used_bytes,
    diskTotalBytes: m.disk_total_bytes,
    loadAvg: m.load_avg,
    atMs: a.last_heartbeat,
  };
}

function sameRow(a: AgentRow, b: AgentRow): boolean {
  return (
    a.status === b.status &&
    a.metrics?.atMs === b.metrics?.atMs &&
    a.agent.last_heartbeat === b.agent.last_heartbeat &&
    a.agent.hostname === b.agent.hostname &&
    a.agent.ip_address === b.agent.ip_address &&
    a.agent.connected_at === b.agent.connected_at
  );
}
