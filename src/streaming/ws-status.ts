/**
 * The `agent_status` and `metrics` messages of the dashboard WebSocket (spec 4.18), from the
 * agents registry's changes: agent_status when an agent's status changes (or it first appears),
 * metrics when its Agent.metrics change. Each is encoded once (actors/protocol/output-events.ts) and published to the
 * agent's status topic and the all-agents one; nothing is encoded while nobody listens.
 */
import { encodeAgentStatusWs, encodeMetricsWs, type AgentStatusName } from '../../actors/protocol/output-events.js';
import type { AgentChange } from '../agent-link/agent-registry.js';

export interface StatusSink {
  /** True when anyone listens to this agent's status (or every agent's). */
  listening(agentId: string): boolean;
  publish(agentId: string, bytes: Uint8Array): void;
}

export class StatusMessages {
  readonly #sink: StatusSink;
  /** The last metrics published per agent (a key of their values), so unchanged ones are not resent. */
  readonly #lastMetrics = new Map<string, string>();

  constructor(sink: StatusSink) {
    this.#sink = sink;
  }

  /** A registry change → agent_status (status changed) and metrics (metrics changed) messages. */
  onAgentChange(change: AgentChange): void {
    if (change.kind === 'removed') {
      this.#lastMetrics.delete(change.agentId);
      return;
    }
    const a = change.agent;
    const listening = this.#sink.listening(a.id);
    const now = Date.now();
    if (change.previousStatus !== a.status && listening) {
      this.#sink.publish(a.id, encodeAgentStatusWs({ agentId: a.id, status: a.status as AgentStatusName, timestampMs: now }));
    }
    const m = a.metrics;
    if (m === undefined) return;
    const key = `${m.cpu_percent}|${m.memory_used_bytes}|${m.memory_total_bytes}|${m.disk_used_bytes}|${m.disk_total_bytes}|${m.load_avg.join(',')}`;
    if (this.#lastMetrics.get(a.id) === key) return;
    this.#lastMetrics.set(a.id, key);
    if (!listening) return;
    this.#sink.publish(
      a.id,
      encodeMetricsWs({
        agentId: a.id,
        cpuPercent: m.cpu_percent,
        memoryUsedBytes: m.memory_used_bytes,
        memoryTotalBytes: m.memory_total_bytes,
        diskUsedBytes: m.disk_used_bytes,
        diskTotalBytes: m.disk_total_bytes,
        loadAvg: m.load_avg,
        timestampMs: now,
      }),
    );
  }
}
