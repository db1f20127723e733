/**
 * The messages between the SQLite activity store's main-thread side (src/activity/sqlite-store.ts)
 * and its worker (actors/activity/sqlite-activity.worker.ts): one request per store call, each with
 * an id the reply carries back. The worker handles them one at a time in the order they were
 * posted, so an ingest posted before a read is visible to it.
 *
 * The shapes are those of the store port (src/activity/store.ts) with one change: a read scope's
 * "any" (ANY_SCOPE there) travels as null, so the worker never has to know the marker.
 */
import type { WireError } from '../../src/core/errors.js';
import type {
  ActivityCollectorCoverage,
  ActivityEvent,
  ActivityEventPage,
  ActivityEventQuery,
  ActivityIngestAck,
} from '../../src/wire/activity.js';

/** What the worker is started with (`workerData`). */
export interface ActivityWorkerData {
  /** The store's own directory; the database is `<dir>/activity.db`. */
  readonly dir: string;
}

/** The scope of an ingest: the five X-Svc-* headers. */
export interface ActivityCallScope {
  readonly tenant_id: string;
  readonly host_id: string;
  readonly instance_id: string;
  readonly agent_id: string;
  readonly collector_id: string;
}

/** The scope of a read: tenant exact; null host, instance or agent match every value. */
export interface ActivityCallReadScope {
  readonly tenant_id: string;
  readonly host_id: string | null;
  readonly instance_id: string | null;
  readonly agent_id: string | null;
}

/** The filters and the page of an events read: the store port's query (src/wire/activity.ts). */
export type ActivityCallQuery = ActivityEventQuery;

export type ActivityCallPage = Pick<ActivityEventPage, 'events' | 'next_cursor' | 'has_more' | 'cursor_found'>;

/**
 * One event of an ingest as it travels to the worker: the columns its filters use, and its record
 * as JSON text. A flat tuple of strings and numbers clones in a fraction of the time the event's
 * object graph takes, and the worker stores the text as it is (it parses it only for a replay).
 */
export type ActivityRow = readonly [
  eventId: string,
  sequence: number,
  eventName: string,
  occurredAtMs: number,
  sessionId: string | null,
  missionId: string | null,
  taskId: string | null,
  toolCallId: string | null,
  commandId: string | null,
  processId: string | null,
  traceId: string | null,
  record: string,
];

/** The row of a validated event (its scope is the call's: the main side checked it). */
export function activityRowOf(e: ActivityEvent): ActivityRow {
  const c = e.correlation;
  return [
    e.event_id,
    e.integrity.collector_sequence,
    e.event_name,
    Date.parse(e.occurred_at),
    c.session_id ?? null,
    c.mission_id ?? null,
    c.task_id ?? null,
    c.tool_call_id ?? null,
    c.command_id ?? null,
    c.process_id ?? null,
    c.trace_id ?? null,
    JSON.stringify(e),
  ];
}

/** Main thread → worker. */
export type ActivityCall =
  | {
      readonly id: number;
      readonly op: 'ingest';
      readonly scope: ActivityCallScope;
      /** Validated by src/activity/record.ts, as rows (activityRowOf). Their canonical JSON does not travel: only a replay needs it, and the worker makes it then. */
      readonly rows: readonly ActivityRow[];
      /** The server's clock at the call, epoch ms: the rows' ingested_at and the collector's last_ingested_at. */
      readonly ingestedAtMs: number;
    }
  | { readonly id: number; readonly op: 'events'; readonly scope: ActivityCallReadScope; readonly query: ActivityCallQuery }
  | { readonly id: number; readonly op: 'coverage'; readonly scope: ActivityCallReadScope; readonly collectorId: string | null }
  | { readonly id: number; readonly op: 'prune'; readonly beforeMs: number; readonly maxRows: number }
  /** Closes the database and ends the worker (after every call posted before it). */
  | { readonly id: number; readonly op: 'close' };

/** What each call resolves to. */
export interface ActivityCallResults {
  ingest: ActivityIngestAck;
  events: ActivityCallPage;
  coverage: ActivityCollectorCoverage[];
  prune: number;
  close: null;
}

/** Worker → main thread: `ready` once the database is open (its path), then one reply per call. */
export type ActivityReply =
  | { readonly t: 'ready'; readonly path: string }
  | { readonly t: 'reply'; readonly id: number; readonly ok: true; readonly value: ActivityCallResults[ActivityCall['op']] }
  | { readonly t: 'reply'; readonly id: number; readonly ok: false; readonly error: WireError };
