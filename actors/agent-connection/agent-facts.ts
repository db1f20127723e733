/**
 * What an agent actor knows about its agent between messages — registration facts, the last
 * heartbeat and metrics, connection times — and the snapshot it emits for the main thread's
 * read model (the spec's Agent fields plus ours).
 */
import type { v1 } from '../../proto/index.js';
import { clip, labelsView, metricsView, nonNegativeInt, systemInfoView } from './agent-view.js';
import type { AgentMetricsView, AgentSnapshot, AgentSystemInfoView } from '../protocol/agent-frames.js';

interface Registration {
  readonly hostname: string;
  readonly ipAddress: string;
  readonly profile: string;
  readonly labels: Record<string, string>;
  readonly agentVersion: string;
  readonly instanceId: string;
  readonly system: AgentSystemInfoView | undefined;
}

export class AgentFacts {
  readonly agentId: string;
  #reg: Registration | null = null;
  #metrics: AgentMetricsView | undefined;
  /** Unix ms the current (or last) stream attached. */
  connectedAtMs = 0;
  /** Unix ms of the last heartbeat (the registration time until the first one). */
  lastHeartbeatMs = 0;
  runningCommands = 0;
  /** Unix ms the stream ended; null while connected. */
  disconnectedAtMs: number | null = null;

  constructor(agentId: string) {
    this.agentId = agentId;
  }

  /** True once a registration was accepted (the agent is listed from then on). */
  get registered(): boolean {
    return this.#reg !== null;
  }

  /** Records an accepted registration (strings bounded); returns the facts for the event. */
  register(reg: v1.IAgentRegistration, instanceId: string, nowMs: number): Record<string, unknown> {
    this.#reg = {
      hostname: clip(reg.hostname),
      ipAddress: clip(reg.ipAddress),
      profile: clip(reg.profile),
      labels: labelsView(reg.labels),
      agentVersion: clip(reg.agentVersion),
      instanceId,
      system: systemInfoView(reg.system),
    };
    this.lastHeartbeatMs = nowMs;
    return {
      hostname: this.#reg.hostname,
      ip_address: this.#reg.ipAddress,
      profile: this.#reg.profile,
      agent_version: this.#reg.agentVersion,
      instance_id: instanceId,
    };
  }

  /** Records a heartbeat; returns the details of its agent.heartbeat event (status added by the caller). */
  heartbeat(hb: v1.IHeartbeat, nowMs: number): Record<string, unknown> {
    this.lastHeartbeatMs = nowMs;
    this.runningCommands = nonNegativeInt(hb.runningCommands);
    return {
      cpu_percent: Math.round(Number(hb.cpuPercent ?? 0) * 100) / 100,
      memory_used_bytes: nonNegativeInt(hb.memoryUsedBytes),
      uptime_seconds: nonNegativeInt(hb.uptimeSeconds),
      running_commands: this.runningCommands,
    };
  }

  metrics(m: v1.IMetrics): void {
    this.#metrics = metricsView(m);
  }

  /** The snapshot; call only once registered. */
  snapshot(status: string): AgentSnapshot {
    const reg = this.#reg!;
    const snap: AgentSnapshot = {
      id: this.agentId,
      hostname: reg.hostname,
      ip_address: reg.ipAddress,
      status,
      connected_at: this.connectedAtMs,
      last_heartbeat: this.lastHeartbeatMs,
      instance_id: reg.instanceId,
      profile: reg.profile,
      labels: reg.labels,
      agent_version: reg.agentVersion,
      running_commands: this.runningCommands,
      disconnected_at: this.disconnectedAtMs,
    };
    if (this.#metrics !== undefined) snap.metrics = this.#metrics;
    if (reg.system !== undefined) snap.system_info = reg.system;
    return snap;
  }
}
