/**
 * The agent actor's side of session reconciliation (spec part 3): SessionReport and
 * SessionReconcileAck go to the main thread as JSON frames (kFrameSessionReport,
 * kFrameSessionReconcileAck), where the sessions reconciler decides; the control calls
 * `sendSessionQuery` / `sendSessionReconcile` carry its answers back to the agent.
 *
 * Everything is copied into plain, bounded values here: the main thread never sees protobuf
 * objects, Longs or unbounded strings.
 */
import type { v1 } from '../../proto/index.js';
import { SvcError } from '../../src/core/errors.js';
import { clip, nonNegativeInt } from './agent-view.js';
import type { SessionReconcileAckFrame, SessionReportFrame } from '../protocol/agent-frames.js';

/** Ids and names are clipped to this many characters. */
const kIdChars = 256;
/** At most this many ids per list (a SessionReconcile or an ack). */
export const kMaxSessionIds = 10_000;

function ids(list: readonly string[] | null | undefined): string[] {
  return (list ?? []).slice(0, kMaxSessionIds).map((id) => clip(id, kIdChars));
}

export function sessionReportFrame(agentId: string, r: v1.ISessionReport): SessionReportFrame {
  return {
    agentId,
    sessions: (r.sessions ?? []).slice(0, kMaxSessionIds).map((s) => ({
      commandId: clip(s.commandId, kIdChars),
      sessionId: clip(s.sessionId, kIdChars),
      sessionName: clip(s.sessionName, kIdChars),
      command: clip(s.command, 1024),
      pid: nonNegativeInt(s.pid),
      isPty: s.isPty === true,
      startedAtMs: nonNegativeInt(s.startedAtMs),
    })),
    timestampMs: nonNegativeInt(r.timestampMs),
  };
}

export function sessionReconcileAckFrame(agentId: string, a: v1.ISessionReconcileAck): SessionReconcileAckFrame {
  return { agentId, killedSessionIds: ids(a.killedSessionIds), keptSessionIds: ids(a.keptSessionIds), failedToKill: ids(a.failedToKill) };
}

function record(args: unknown): Record<string, unknown> {
  if (typeof args !== 'object' || args === null) throw new SvcError('request.invalid', 'arguments must be an object');
  return args as Record<string, unknown>;
}

function stringList(v: unknown, name: string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.length > kMaxSessionIds || !v.every((x) => typeof x === 'string')) {
    throw new SvcError('request.invalid', `${name} must be an array of at most ${kMaxSessionIds} strings`);
  }
  return v;
}

/** `sendSessionQuery` arguments: {reportAll?: boolean, sessionIds?: string[]}. */
export function sessionQueryOf(args: unknown): v1.ISessionQuery {
  const a = record(args);
  return { reportAll: a['reportAll'] === true, sessionIds: stringList(a['sessionIds'], 'sessionIds') };
}

/** `sendSessionReconcile` arguments: SessionReconcileFields of src/sessions/reconcile.ts. */
export function sessionReconcileOf(args: unknown): v1.ISessionReconcile {
  const a = record(args);
  const grace = a['gracePeriodSeconds'];
  if (grace !== undefined && !(typeof grace === 'number' && Number.isInteger(grace) && grace >= 0 && grace <= 3600)) {
    throw new SvcError('request.invalid', 'gracePeriodSeconds must be an integer 0..3600');
  }
  return {
    keepSessionIds: stringList(a['keepSessionIds'], 'keepSessionIds'),
    killSessionIds: stringList(a['killSessionIds'], 'killSessionIds'),
    killUnrecognized: a['killUnrecognized'] === true,
    gracePeriodSeconds: typeof grace === 'number' ? grace : 0,
  };
}
