/**
 * Drives one {@link ReconcileRun} per agent connection (spec part 3, "Session reconciliation
 * after server restart") with its two timers:
 *
 *   agentRegistered ─► SessionQuery {report_all} ─(reportTimeoutMs, default 30 s)─► SessionReport
 *   ─► SessionReconcile {keep, kill, kill_unrecognized, grace} ─(ackTimeoutMs, default grace +
 *   30 s: the agent waits the grace period before SIGKILL)─► SessionReconcileAck
 *
 * A missed timer, a disconnect or a new registration ends the run with session.reconcile_failed
 * (report_timeout / ack_timeout / agent_disconnected / superseded); nothing is killed by a
 * failure. The plan goes to `onPlan` (mark reported sessions running, re-attach the others) as
 * soon as the report arrives.
 */
import type { SessionRecord } from './session-types.js';
import {
  DEFAULT_RECONCILE_GRACE_SECONDS,
  ReconcileRun,
  type ReconcileMetrics,
  type ReconcilePlan,
  type SessionEvent,
  type SessionReconcileAckInput,
  type SessionReconcileFields,
  type SessionReportInput,
} from './reconcile.js';

export const DEFAULT_REPORT_TIMEOUT_MS = 30_000;
/** Added to the grace period for the ack deadline. */
export const kAckSlackMs = 30_000;

/** How the reconciler reaches an agent (the agents server's ManagementMessage sender). */
export interface ReconcileTransport {
  sendSessionQuery(agentId: string, query: { reportAll: boolean; sessionIds: string[] }): void;
  sendSessionReconcile(agentId: string, reconcile: SessionReconcileFields): void;
}

export interface SessionReconcilerOptions {
  readonly sessions: { listByAgent(agentId: string): SessionRecord[] };
  readonly transport: ReconcileTransport;
  readonly emit: (e: SessionEvent) => void;
  readonly metrics?: ReconcileMetrics;
  /** Default {@link DEFAULT_RECONCILE_GRACE_SECONDS}. */
  readonly graceSeconds?: number;
  /** Default false (see reconcile.ts). */
  readonly killUnrecognized?: boolean;
  /** Default {@link DEFAULT_REPORT_TIMEOUT_MS}. */
  readonly reportTimeoutMs?: number;
  /** Default graceSeconds * 1000 + {@link kAckSlackMs}. */
  readonly ackTimeoutMs?: number;
  /** Commands owned elsewhere (tasks) that must be kept. */
  readonly isKnownCommand?: (commandId: string, sessionId: string) => boolean;
  /** Apply the plan (running / re-attach). */
  readonly onPlan?: (agentId: string, plan: ReconcilePlan) => void;
  readonly now?: () => number;
}

interface Pending {
  readonly run: ReconcileRun;
  timer: NodeJS.Timeout | undefined;
}

export class SessionReconciler {
  readonly #opts: SessionReconcilerOptions;
  readonly #graceSeconds: number;
  readonly #runs = new Map<string, Pending>();

  constructor(opts: SessionReconcilerOptions) {
    this.#opts = opts;
    this.#graceSeconds = opts.graceSeconds ?? DEFAULT_RECONCILE_GRACE_SECONDS;
  }

  /** Runs in progress (for tests and health). */
  get pending(): number {
    return this.#runs.size;
  }

  /** The agent registered on a new stream: send SessionQuery. */
  agentRegistered(agentId: string): void {
    this.#end(agentId, 'superseded');
    const p: Pending = { run: new ReconcileRun(agentId, this.#opts.emit, this.#opts.metrics, this.#opts.now), timer: undefined };
    this.#runs.set(agentId, p);
    const query = p.run.querySent();
    this.#arm(agentId, p, this.#opts.reportTimeoutMs ?? DEFAULT_REPORT_TIMEOUT_MS, 'report_timeout');
    this.#opts.transport.sendSessionQuery(agentId, query);
  }

  /** A SessionReport arrived. False when no run was waiting for one (ignored). */
  reportReceived(agentId: string, report: SessionReportInput): boolean {
    const p = this.#runs.get(agentId);
    if (p === undefined) return false;
    const r = p.run.reportReceived(report, this.#opts.sessions.listByAgent(agentId), {
      graceSeconds: this.#graceSeconds,
      ...(this.#opts.killUnrecognized !== undefined && { killUnrecognized: this.#opts.killUnrecognized }),
      ...(this.#opts.isKnownCommand !== undefined && { isKnownCommand: this.#opts.isKnownCommand }),
    });
    if (r === null) return false;
    this.#arm(agentId, p, this.#opts.ackTimeoutMs ?? this.#graceSeconds * 1000 + kAckSlackMs, 'ack_timeout');
    this.#opts.onPlan?.(agentId, r.plan);
    this.#opts.transport.sendSessionReconcile(agentId, r.message);
    return true;
  }

  /** A SessionReconcileAck arrived. False when no run was waiting for one. */
  ackReceived(agentId: string, ack: SessionReconcileAckInput): boolean {
    const p = this.#runs.get(agentId);
    if (p === undefined || !p.run.ackReceived(ack)) return false;
    this.#clear(agentId, p);
    return true;
  }

  /** The agent's stream ended: a run in progress fails (nothing is killed). */
  agentDisconnected(agentId: string): void {
    this.#end(agentId, 'agent_disconnected');
  }

  /** Clears every timer (runs are abandoned without events). Idempotent. */
  stop(): void {
    for (const [agentId, p] of this.#runs) this.#clear(agentId, p);
  }

  #arm(agentId: string, p: Pending, ms: number, reason: 'report_timeout' | 'ack_timeout'): void {
    if (p.timer !== undefined) clearTimeout(p.timer);
    p.timer = setTimeout(() => {
      if (this.#runs.get(agentId) !== p) return;
      p.run.fail(reason);
      this.#clear(agentId, p);
    }, ms).unref();
  }

  #end(agentId: string, reason: 'agent_disconnected' | 'superseded'): void {
    const p = this.#runs.get(agentId);
    if (p === undefined) return;
    p.run.fail(reason);
    this.#clear(agentId, p);
  }

  #clear(agentId: string, p: Pending): void {
    if (p.timer !== undefined) clearTimeout(p.timer);
    p.timer = undefined;
    if (this.#runs.get(agentId) === p) this.#runs.delete(agentId);
  }
}
