/**
 * Agent and command metrics. The spec's (svc_commands_total, svc_commands_by_result,
 * svc_command_latency_seconds) live on the shared Metrics object; this adds our two agent-input
 * counters to the same registry and an HDR histogram of command latency, whose percentiles the
 * bench suite and stats() read (prom-client's buckets are too coarse for p99s).
 */
import * as hdr from 'hdr-histogram-js';
import { Counter } from 'prom-client';
import { COMMAND_RESULTS, REJECT_REASONS, type AgentMetricFrame } from '../../actors/protocol/agent-frames.js';
import type { Metrics } from '../observability/metrics.js';

/** Codes a refused Connect or Exec is counted under (error-table codes). */
export const REFUSAL_CODES = [
  'agent.unauthenticated',
  'agent.identity_mismatch',
  'identity.operator_required',
  'request.invalid',
  'server.not_ready',
] as const;

export interface CommandLatencyPercentiles {
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export class AgentMetrics {
  readonly #metrics: Pick<Metrics, 'commandsTotal' | 'commandsByResult' | 'commandLatencySeconds'>;
  /** svc_agent_messages_rejected_total{reason}: agent messages ignored or refused (reasons: frames.ts REJECT_REASONS). */
  readonly messagesRejected: Counter<'reason'>;
  /** svc_agent_streams_refused_total{code}: Connect and Exec calls refused before they started. */
  readonly callsRefused: Counter<'code'>;
  /** Command latency in microseconds, 1 µs to 1 h, 3 significant digits. */
  readonly #latencyUs = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: 3 });

  constructor(metrics: Pick<Metrics, 'registry' | 'commandsTotal' | 'commandsByResult' | 'commandLatencySeconds'>) {
    this.#metrics = metrics;
    const registers = [metrics.registry];
    this.messagesRejected = new Counter({
      name: 'svc_agent_messages_rejected_total',
      help: 'Agent messages ignored or refused, by reason',
      labelNames: ['reason'],
      registers,
    });
    this.callsRefused = new Counter({
      name: 'svc_agent_calls_refused_total',
      help: 'gRPC Connect and Exec calls refused before they started, by error code',
      labelNames: ['code'],
      registers,
    });
    for (const reason of REJECT_REASONS) this.messagesRejected.inc({ reason }, 0);
    for (const code of REFUSAL_CODES) this.callsRefused.inc({ code }, 0);
    for (const result of COMMAND_RESULTS) metrics.commandsByResult.inc({ result }, 0);
  }

  /** Applies one kFrameAgentMetric frame from an agent actor. */
  apply(frame: AgentMetricFrame): void {
    switch (frame.type) {
      case 'command_started':
        this.#metrics.commandsTotal.inc();
        return;
      case 'command_finished': {
        if (!(COMMAND_RESULTS as readonly string[]).includes(frame.result)) return;
        const seconds = Number.isFinite(frame.latency_seconds) && frame.latency_seconds >= 0 ? frame.latency_seconds : 0;
        this.#metrics.commandsByResult.inc({ result: frame.result });
        this.#metrics.commandLatencySeconds.observe(seconds);
        this.#latencyUs.recordValue(Math.min(3_600_000_000, Math.max(1, Math.round(seconds * 1e6))));
        return;
      }
      case 'message_rejected':
        if ((REJECT_REASONS as readonly string[]).includes(frame.reason)) this.messagesRejected.inc({ reason: frame.reason });
        return;
    }
  }

  /** A refused call, by error code. */
  refused(code: string): void {
    this.callsRefused.inc({ code });
  }

  latency(): CommandLatencyPercentiles {
    const h = this.#latencyUs;
    return {
      count: h.totalCount,
      p50Ms: h.getValueAtPercentile(50) / 1000,
      p99Ms: h.getValueAtPercentile(99) / 1000,
      maxMs: h.maxValue / 1000,
    };
  }
}
