/**
 * Session reconciliation after sandboxd or an agent restarts (spec part 3): the decision and the
 * event sequence, as pure logic. The timers and the wire are in session-reconciler.ts.
 *
 * Decision, per reported ActiveSession (its id is session_id, or command_id when empty — the
 * agent's own key):
 * - keep when the registry knows it: same session id, or same command id, or a `tmux:<name>`
 *   entry (an agent listing tmux sessions) naming one of this agent's sessions; also keep
 *   commands another dispatcher owns (`isKnownCommand`, e.g. tasks);
 * - kill otherwise, by explicit id (`kill_session_ids`). kill_unrecognized stays false by
 *   default: a session the agent starts between its report and our SessionReconcile (a create
 *   racing the reconnect) must not die for being new.
 * Registry sessions of the agent whose current command is reported are `running`; the others
 * need a re-attach (their tmux session may have outlived an agent restart; the attach command
 * fails at once if it did not, and the session closes).
 *
 * Events (part 6), in order: session.query_sent → session.report_received →
 * session.reconcile_started → session.preserved (one per kept) → [SessionReconcileAck]
 * session.killed (one per id the agent killed) → session.reconcile_complete; or, in place of the
 * rest at any point, one session.reconcile_failed {reason: report_timeout | ack_timeout |
 * agent_disconnected | superseded | kill_failed}. Exactly one of complete / failed ends a run.
 * Brief network loss never kills: only ids in an explicit SessionReconcile are killed.
 */
import type { SessionRecord } from './session-types.js';

/** Default seconds between SIGTERM and SIGKILL in SessionReconcile. */
export const DEFAULT_RECONCILE_GRACE_SECONDS = 5;
export const TMUX_COMMAND_PREFIX = 'tmux:';

/** The fields of an ActiveSession we use (proto v1.IActiveSession fits). */
export interface ReportedSession {
  readonly commandId?: string | null;
  readonly sessionId?: string | null;
  readonly sessionName?: string | null;
  readonly command?: string | null;
  readonly pid?: number | null;
}

export interface SessionReportInput {
  readonly sessions?: readonly ReportedSession[] | null;
  readonly timestampMs?: number | null;
}

export interface SessionReconcileAckInput {
  readonly killedSessionIds?: readonly string[] | null;
  readonly keptSessionIds?: readonly string[] | null;
  readonly failedToKill?: readonly string[] | null;
}

export interface ReconcilePlan {
  /** Reported ids to keep, with the registry session they belong to (when one). */
  readonly keep: readonly {
    readonly id: string;
    readonly commandId: string;
    readonly sessionId: string | undefined;
    readonly sessionName: string;
  }[];
  /** Reported ids to kill. */
  readonly kill: readonly { readonly id: string; readonly commandId: string; readonly sessionName: string }[];
  /** Registry sessions whose current command runs. */
  readonly running: readonly string[];
  /** Registry sessions whose command was not reported: re-attach. */
  readonly reattach: readonly string[];
}

/** SessionReconcile's fields, camelCase as in the generated proto code. */
export interface SessionReconcileFields {
  keepSessionIds: string[];
  killSessionIds: string[];
  killUnrecognized: boolean;
  gracePeriodSeconds: number;
}

/** The agent's key of a reported session. */
export function reportedId(s: ReportedSession): string {
  return s.sessionId || s.commandId || '';
}

/** Decides keep / kill / running / reattach for one agent's report. */
export function planReconcile(
  known: readonly SessionRecord[],
  report: SessionReportInput,
  isKnownCommand: (commandId: string, sessionId: string) => boolean = () => false,
): ReconcilePlan {
  const byId = new Map(known.map((r) => [r.sessionId, r]));
  const byCommand = new Map(known.map((r) => [r.commandId, r]));
  const byName = new Map(known.map((r) => [r.sessionName, r]));
  const keep: ReconcilePlan['keep'][number][] = [];
  const kill: ReconcilePlan['kill'][number][] = [];
  const running = new Set<string>();
  // Group by the agent's key: an id is killed only when NO entry carrying it is known (the agent
  // kills by id, so killing an ambiguous id could hit a known session).
  const byReported = new Map<string, ReportedSession[]>();
  for (const s of report.sessions ?? []) {
    const id = reportedId(s);
    if (id === '') continue;
    const list = byReported.get(id);
    if (list === undefined) byReported.set(id, [s]);
    else list.push(s);
  }
  for (const [id, entries] of byReported) {
    let kept = false;
    for (const s of entries) {
      const commandId = s.commandId ?? '';
      let rec = (s.sessionId ? byId.get(s.sessionId) : undefined) ?? byCommand.get(commandId);
      if (rec === undefined && commandId.startsWith(TMUX_COMMAND_PREFIX)) rec = byName.get(commandId.slice(TMUX_COMMAND_PREFIX.length));
      if (rec !== undefined) {
        if (!kept) keep.push({ id, commandId, sessionId: rec.sessionId, sessionName: rec.sessionName });
        kept = true;
        if (commandId === rec.commandId) running.add(rec.sessionId);
      }
    }
    if (kept) continue;
    const first = entries[0] ?? {};
    if (entries.some((s) => isKnownCommand(s.commandId ?? '', s.sessionId ?? ''))) {
      keep.push({ id, commandId: first.commandId ?? '', sessionId: undefined, sessionName: first.sessionName ?? '' });
    } else {
      kill.push({ id, commandId: first.commandId ?? '', sessionName: first.sessionName ?? '' });
    }
  }
  return {
    keep,
    kill,
    running: [...running],
    reattach: known.filter((r) => !running.has(r.sessionId)).map((r) => r.sessionId),
  };
}

/** The SessionReconcile message for a plan. */
export function reconcileMessage(
  plan: ReconcilePlan,
  opts: { graceSeconds?: number; killUnrecognized?: boolean } = {},
): SessionReconcileFields {
  return {
    keepSessionIds: plan.keep.map((k) => k.id),
    killSessionIds: plan.kill.map((k) => k.id),
    killUnrecognized: opts.killUnrecognized ?? false,
    gracePeriodSeconds: opts.graceSeconds ?? DEFAULT_RECONCILE_GRACE_SECONDS,
  };
}

/** An event for the v1 store (EventStore.append takes it as is). */
export interface SessionEvent {
  readonly event_type: string;
  readonly agent_id: string;
  readonly details: Record<string, unknown>;
}

/** prom-client Counter fits. */
export interface CounterLike {
  inc(value?: number): void;
}

export interface ReconcileMetrics {
  /** svc_session_reconciliations_total: +1 per SessionReconcile sent. */
  readonly sessionReconciliationsTotal: CounterLike;
  /** svc_sessions_killed_total: + the ids the agent reports killed. */
  readonly sessionsKilledTotal: CounterLike;
}

export type ReconcileFailure = 'report_timeout' | 'ack_timeout' | 'agent_disconnected' | 'superseded' | 'kill_failed';
export type ReconcilePhase = 'querying' | 'reconciling' | 'done';

/** One reconciliation of one agent: the event sequence as a small state machine. */
export class ReconcileRun {
  readonly agentId: string;
  readonly #emit: (e: SessionEvent) => void;
  readonly #metrics: ReconcileMetrics | undefined;
  readonly #now: () => number;
  #phase: ReconcilePhase = 'querying';
  #startedMs = 0;
  #plan: ReconcilePlan | undefined;

  constructor(agentId: string, emit: (e: SessionEvent) => void, metrics?: ReconcileMetrics, now: () => number = Date.now) {
    this.agentId = agentId;
    this.#emit = emit;
    this.#metrics = metrics;
    this.#now = now;
  }

  get phase(): ReconcilePhase {
    return this.#phase;
  }
  get plan(): ReconcilePlan | undefined {
    return this.#plan;
  }

  /** The SessionQuery was sent. */
  querySent(): { reportAll: true; sessionIds: string[] } {
    this.#startedMs = this.#now();
    this.#event('session.query_sent', { report_all: true });
    return { reportAll: true, sessionIds: [] };
  }

  /** The SessionReport arrived: plan and the SessionReconcile to send. Null when not querying. */
  reportReceived(
    report: SessionReportInput,
    known: readonly SessionRecord[],
    opts: { graceSeconds?: number; killUnrecognized?: boolean; isKnownCommand?: (commandId: string, sessionId: string) => boolean } = {},
  ): { plan: ReconcilePlan; message: SessionReconcileFields } | null {
    if (this.#phase !== 'querying') return null;
    this.#phase = 'reconciling';
    const plan = planReconcile(known, report, opts.isKnownCommand);
    const message = reconcileMessage(plan, opts);
    this.#plan = plan;
    this.#event('session.report_received', {
      session_count: report.sessions?.length ?? 0,
      report_timestamp_ms: report.timestampMs ?? null,
    });
    this.#event('session.reconcile_started', {
      keep_session_ids: message.keepSessionIds,
      kill_session_ids: message.killSessionIds,
      kill_unrecognized: message.killUnrecognized,
      grace_period_seconds: message.gracePeriodSeconds,
    });
    this.#metrics?.sessionReconciliationsTotal.inc();
    for (const k of plan.keep) {
      this.#event('session.preserved', {
        session_id: k.sessionId ?? k.id,
        reported_id: k.id,
        command_id: k.commandId,
        session_name: k.sessionName,
        reattach: k.sessionId !== undefined && plan.reattach.includes(k.sessionId),
      });
    }
    return { plan, message };
  }

  /** The SessionReconcileAck arrived. False when not waiting for one. */
  ackReceived(ack: SessionReconcileAckInput): boolean {
    if (this.#phase !== 'reconciling') return false;
    this.#phase = 'done';
    // Ids we asked to kill, plus any unrecognized ones the agent killed (kill_unrecognized); never a kept id.
    const kept = new Set(this.#plan?.keep.map((k) => k.id));
    const killed = [...new Set(ack.killedSessionIds ?? [])].filter((id) => !kept.has(id));
    for (const id of killed) this.#event('session.killed', { session_id: id, reason: 'unrecognized' });
    if (killed.length > 0) this.#metrics?.sessionsKilledTotal.inc(killed.length);
    const failed = [...(ack.failedToKill ?? [])];
    if (failed.length > 0) {
      this.#event('session.reconcile_failed', { reason: 'kill_failed', failed_session_ids: failed, killed_session_ids: killed });
    } else {
      this.#event('session.reconcile_complete', {
        kept: this.#plan?.keep.length ?? 0,
        killed: killed.length,
        duration_ms: this.#now() - this.#startedMs,
      });
    }
    return true;
  }

  /** Ends the run with session.reconcile_failed (no-op once done). */
  fail(reason: ReconcileFailure): void {
    if (this.#phase === 'done') return;
    const phase = this.#phase;
    this.#phase = 'done';
    this.#event('session.reconcile_failed', { reason, phase });
  }

  #event(type: string, details: Record<string, unknown>): void {
    this.#emit({ event_type: type, agent_id: this.agentId, details });
  }
}
