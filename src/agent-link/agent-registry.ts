/**
 * The main thread's read model of agents, fed by the snapshot frames agent actors emit after
 * every change. GET /api/v1/agents and /healthz/deep read it without calling into a worker.
 * It keeps svc_agents_connected and svc_agents_by_status in step with what it lists.
 *
 * An agent is listed from its first accepted registration until it is removed (retention after
 * the stream ended, see SVC_AGENT_RETENTION_SECONDS).
 */
import type { AgentSnapshot } from '../../actors/protocol/agent-frames.js';
import { AGENT_STATUSES, isAgentStatus, type AgentStatus } from '../core/agent-status.js';
import type { Metrics } from '../observability/metrics.js';
import type { Agent } from '../wire/agents.js';

/** The spec's Agent (part 2), exactly (src/wire/agents.ts): GET /api/v1/agents lists these. */
export type { Agent };

/** JSON schema of Agent (the route's fast-json-stringify serializer drops anything else). */
export const AGENT_JSON_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    hostname: { type: 'string' },
    ip_address: { type: 'string' },
    status: { type: 'string' },
    connected_at: { type: 'integer' },
    last_heartbeat: { type: 'integer' },
    metrics: {
      type: 'object',
      properties: {
        cpu_percent: { type: 'number' },
        memory_used_bytes: { type: 'integer' },
        memory_total_bytes: { type: 'integer' },
        disk_used_bytes: { type: 'integer' },
        disk_total_bytes: { type: 'integer' },
        load_avg: { type: 'array', items: { type: 'number' } },
        uptime_seconds: { type: 'integer' },
      },
      required: [
        'cpu_percent',
        'memory_used_bytes',
        'memory_total_bytes',
        'disk_used_bytes',
        'disk_total_bytes',
        'load_avg',
        'uptime_seconds',
      ],
    },
    system_info: {
      type: 'object',
      properties: {
        os: { type: 'string' },
        kernel: { type: 'string' },
        cpu_cores: { type: 'integer' },
        memory_bytes: { type: 'integer' },
        disk_bytes: { type: 'integer' },
      },
      required: ['os', 'kernel', 'cpu_cores', 'memory_bytes', 'disk_bytes'],
    },
  },
  required: ['id', 'hostname', 'ip_address', 'status', 'connected_at', 'last_heartbeat'],
} as const;

/** A registry change, for live views (WS agent_status, dashboards). */
export type AgentChange =
  { kind: 'updated'; agent: AgentSnapshot; previousStatus: AgentStatus | null } | { kind: 'removed'; agentId: string };

function toAgent(s: AgentSnapshot): Agent {
  const a: Agent = {
    id: s.id,
    hostname: s.hostname,
    ip_address: s.ip_address,
    status: s.status as AgentStatus,
    connected_at: s.connected_at,
    last_heartbeat: s.last_heartbeat,
  };
  if (s.metrics !== undefined) a.metrics = { ...s.metrics, load_avg: [...s.metrics.load_avg] };
  if (s.system_info !== undefined) a.system_info = { ...s.system_info };
  return a;
}

export class AgentRegistry {
  readonly #agents = new Map<string, AgentSnapshot>();
  readonly #byStatus = new Map<AgentStatus, number>(AGENT_STATUSES.map((s) => [s, 0]));
  readonly #metrics: Pick<Metrics, 'agentsConnected' | 'agentsByStatus'> | undefined;
  readonly #listeners = new Set<(change: AgentChange) => void>();

  constructor(opts: { metrics?: Pick<Metrics, 'agentsConnected' | 'agentsByStatus'> } = {}) {
    this.#metrics = opts.metrics;
  }

  /** Listed agents (any status). */
  get size(): number {
    return this.#agents.size;
  }

  /** Agents whose stream is open (every status but Disconnected): svc_agents_connected. */
  connectedCount(): number {
    return this.#agents.size - (this.#byStatus.get('Disconnected') ?? 0);
  }

  /** Applies an actor's snapshot. A snapshot with an unknown status is ignored (returns false). */
  apply(snapshot: AgentSnapshot): boolean {
    if (!isAgentStatus(snapshot.status) || typeof snapshot.id !== 'string' || snapshot.id === '') return false;
    const previous = this.#agents.get(snapshot.id);
    const previousStatus = previous === undefined ? null : (previous.status as AgentStatus);
    this.#agents.set(snapshot.id, snapshot);
    this.#count(previousStatus, snapshot.status);
    this.#notify({ kind: 'updated', agent: snapshot, previousStatus });
    return true;
  }

  /** Removes an agent (retention ran out). */
  remove(agentId: string): boolean {
    const previous = this.#agents.get(agentId);
    if (previous === undefined) return false;
    this.#agents.delete(agentId);
    this.#count(previous.status as AgentStatus, null);
    this.#notify({ kind: 'removed', agentId });
    return true;
  }

  /**
   * Marks an agent Disconnected from the main thread (its actor is gone: the shard crashed).
   * Returns the updated snapshot, or undefined for an unknown or already disconnected agent.
   */
  markDisconnected(agentId: string, atMs: number): AgentSnapshot | undefined {
    const previous = this.#agents.get(agentId);
    if (previous === undefined || previous.status === 'Disconnected') return undefined;
    const next: AgentSnapshot = { ...previous, status: 'Disconnected', disconnected_at: atMs };
    this.apply(next);
    return next;
  }

  /** The full snapshot (spec fields and ours). */
  get(agentId: string): AgentSnapshot | undefined {
    return this.#agents.get(agentId);
  }

  /** The spec's Agent list, sorted by id. */
  list(): Agent[] {
    return [...this.#agents.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map(toAgent);
  }

  ids(): string[] {
    return [...this.#agents.keys()];
  }

  /** Counts by status (all seven keys). */
  countsByStatus(): Record<AgentStatus, number> {
    return Object.fromEntries(this.#byStatus) as Record<AgentStatus, number>;
  }

  /** Live changes; returns the unsubscribe function. A throwing listener is dropped. */
  subscribe(listener: (change: AgentChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #count(from: AgentStatus | null, to: string | null): void {
    if (from === to) return;
    if (from !== null) this.#byStatus.set(from, (this.#byStatus.get(from) ?? 1) - 1);
    if (to !== null && isAgentStatus(to)) this.#byStatus.set(to, (this.#byStatus.get(to) ?? 0) + 1);
    const m = this.#metrics;
    if (m === undefined) return;
    if (from !== null) m.agentsByStatus.set({ status: from }, this.#byStatus.get(from) ?? 0);
    if (to !== null && isAgentStatus(to)) m.agentsByStatus.set({ status: to }, this.#byStatus.get(to) ?? 0);
    m.agentsConnected.set(this.connectedCount());
  }

  #notify(change: AgentChange): void {
    for (const l of this.#listeners) {
      try {
        l(change);
      } catch {
        // A broken live view must not stop the registry; it is unsubscribed.
        this.#listeners.delete(l);
      }
    }
  }
}
