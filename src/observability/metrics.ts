/**
 * Every Prometheus metric sandboxd exports, on one prom-client Registry made in main and passed
 * down (no global default registry, so tests and several servers in one process do not share
 * counters). Names are the spec's (4.1) plus our own `svc_*` operational ones.
 *
 * Labels are bounded: statuses and states are fixed sets, `route` is a route pattern (never a
 * raw path), `code` an error-table code, `component` a module name.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { AGENT_STATUSES } from '../wire/agents.js';
import { TASK_STATES } from '../wire/tasks.js';

/** Agent status label values (spec part 3: src/wire/agents.ts), pre-set to 0 so dashboards see every series. */
export const AGENT_STATUS_LABELS = AGENT_STATUSES;

/** Task state label values (spec part 3: src/wire/tasks.ts), pre-set to 0. */
export const TASK_STATE_LABELS = TASK_STATES;

/** Task outcome label values (spec 4.1), pre-initialised. */
export const TASK_OUTCOME_LABELS = ['success', 'failure'] as const;

/**
 * Command latency buckets in seconds: interactive commands finish in milliseconds, coding-task
 * commands can run for an hour.
 */
export const COMMAND_LATENCY_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

const LINT_FAILING_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export interface Metrics {
  readonly registry: Registry;
  /** `text/plain; version=0.0.4; charset=utf-8`. */
  readonly contentType: string;
  // spec 4.1
  readonly agentsConnected: Gauge;
  readonly agentsByStatus: Gauge<'status'>;
  readonly tasksByState: Gauge<'state'>;
  readonly commandsTotal: Counter;
  readonly commandsByResult: Counter<'result'>;
  readonly commandLatencySeconds: Histogram;
  readonly taskOutcomesTotal: Counter<'outcome'>;
  readonly agentshareInboxBytes: Gauge;
  readonly sessionReconciliationsTotal: Counter;
  readonly sessionsKilledTotal: Counter;
  // ours
  /** Finished HTTP requests by route pattern and status class (`2xx`..`5xx`, `aborted`). */
  readonly httpRequestsTotal: Counter<'route' | 'status_class'>;
  /** Error envelopes sent, by error code. */
  readonly httpErrorsTotal: Counter<'code'>;
  readonly actorShardRestartsTotal: Counter;
  /** Every error- and fatal-level log line, counted by the logger's hook (log.ts countErrorLines; STYLE point 6). */
  readonly errorsLoggedTotal: Counter<'component'>;
}

export interface MetricsOptions {
  /** Register prom-client's process and Node.js metrics on the registry. Default true. */
  defaultMetrics?: boolean;
}

/** Create the registry with every metric registered and label sets pre-initialised. */
export function createMetrics(opts: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> =>
    new Gauge<L>({ name, help, labelNames, registers });
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> =>
    new Counter<L>({ name, help, labelNames, registers });

  const metrics: Metrics = {
    registry,
    contentType: registry.contentType,
    agentsConnected: gauge('svc_agents_connected', 'Agents with an open gRPC channel'),
    agentsByStatus: gauge('svc_agents_by_status', 'Agents by reported status', ['status']),
    tasksByState: gauge('svc_tasks_by_state', 'Tasks by lifecycle state', ['state']),
    commandsTotal: counter('svc_commands_total', 'Commands sent to agents'),
    // Exactly the spec's name (4.1), although promtool's lint wants counters to end in _total:
    // clients of the spec scrape this name (README "Decisions"; the promtool test allows this one finding).
    commandsByResult: counter('svc_commands_by_result', 'Finished commands by result', ['result']),
    commandLatencySeconds: new Histogram({
      name: 'svc_command_latency_seconds',
      help: 'Time from command dispatch to its completion, in seconds',
      buckets: COMMAND_LATENCY_BUCKETS_SECONDS,
      registers,
    }),
    taskOutcomesTotal: counter('svc_task_outcomes_total', 'Finished tasks by outcome', ['outcome']),
    agentshareInboxBytes: gauge('svc_agentshare_inbox_bytes', 'Bytes stored in agent share inboxes'),
    sessionReconciliationsTotal: counter('svc_session_reconciliations_total', 'Session reconciliations run after a server restart'),
    sessionsKilledTotal: counter('svc_sessions_killed_total', 'Sessions killed by reconciliation or by request'),
    httpRequestsTotal: counter('svc_http_requests_total', 'Finished HTTP requests by route pattern and status class', [
      'route',
      'status_class',
    ]),
    httpErrorsTotal: counter('svc_http_errors_total', 'HTTP error envelopes sent, by error code', ['code']),
    actorShardRestartsTotal: counter('svc_actor_shard_restarts_total', 'Worker shards restarted after a crash'),
    errorsLoggedTotal: counter('svc_errors_logged_total', 'Error-level log lines, by component', ['component']),
  };

  for (const status of AGENT_STATUS_LABELS) metrics.agentsByStatus.set({ status }, 0);
  for (const state of TASK_STATE_LABELS) metrics.tasksByState.set({ state }, 0);
  for (const outcome of TASK_OUTCOME_LABELS) metrics.taskOutcomesTotal.inc({ outcome }, 0);
  metrics.agentsConnected.set(0);
  metrics.agentshareInboxBytes.set(0);

  if (opts.defaultMetrics !== false) {
    collectDefaultMetrics({ register: registry });
    // These three are gauges named *_total, which `promtool check metrics` rejects; the same
    // numbers stay available by type in nodejs_active_{handles,requests,resources}.
    for (const name of LINT_FAILING_DEFAULT_METRICS) registry.removeSingleMetric(name);
  }
  return metrics;
}

/** `2xx`-style class of an HTTP status, or `aborted` for 0 (client left before the response). */
export function statusClass(status: number): string {
  return status === 0 ? 'aborted' : `${Math.floor(status / 100)}xx`;
}
