/**
 * The activity store's port (issue 19 part 4): one contract, two implementations, chosen by
 * SVC_ACTIVITY_STORE: `sqlite` (default; a file under SVC_STATE_DIR, written by a worker thread so
 * a durable commit never stalls the main thread) or a `postgres://` URL (the `pg` driver; schema
 * created and migrated on open). test/support/activity-store-contract.ts is the one behaviour
 * suite both pass.
 *
 * The rules every implementation keeps (README "Activity store"):
 * - ingest is one transaction; its promise resolves only after the commit is durable, and rejects
 *   (nothing stored) otherwise;
 * - an event_id already stored with the same canonical JSON is a duplicate: no second row, listed in
 *   duplicate_event_ids; with different content the whole batch is refused (activity.event_id_conflict);
 * - a collector_sequence already stored under another event_id refuses the batch (activity.sequence_conflict);
 * - per collector (the five scope values), an event whose sequence is above the highest stored + 1
 *   records the skipped run as a durable gap and reports a jump {expected, got};
 * - events are paged in ingest order (a monotonic stored position), so a cursor (the last event_id
 *   of a page) resumes exactly after it even while ingest goes on; a cursor that names no stored
 *   event gives cursor_found: false and a page from the beginning;
 * - prune removes events ingested before a time, a bounded number per call, so retention never
 *   holds the store for long.
 */
import type {
  ActivityCollectorCoverage,
  ActivityEvent,
  ActivityEventFilter,
  ActivityEventPage,
  ActivityEventQuery,
  ActivityIngestAck,
  ActivitySequenceGap,
} from '../wire/activity.js';
import type { ActivityScope, ValidatedEvent } from './record.js';

export type { ActivityScope, ValidatedEvent };
export type {
  ActivityCollectorCoverage,
  ActivityEvent,
  ActivityEventFilter,
  ActivityEventPage,
  ActivityEventQuery,
  ActivityIngestAck,
  ActivitySequenceGap,
};

/** `*` in a read scope matches every value (our extension: the dashboard's fleet-wide timeline). Tenant is always exact. */
export const ANY_SCOPE = '*';

/** The scope of a read: the four X-Svc-* headers; host, instance and agent may be ANY_SCOPE. */
export interface ActivityReadScope {
  readonly tenant_id: string;
  readonly host_id: string;
  readonly instance_id: string;
  readonly agent_id: string;
}

/** A page as the store returns it; the route adds schema_version and coverage. */
export type ActivityStorePage = Pick<ActivityEventPage, 'events' | 'next_cursor' | 'has_more' | 'cursor_found'>;

export interface ActivityStore {
  /** `sqlite` or `postgres`, for the log line, /healthz/deep and metrics. */
  readonly kind: 'sqlite' | 'postgres';
  /** Where it is (file path, or the URL without its password). */
  readonly location: string;
  /** Stores a validated batch of one scope in one durable transaction; see the rules above. */
  ingest(scope: ActivityScope, events: readonly ValidatedEvent[]): Promise<ActivityIngestAck>;
  /** A page of events in ingest order. */
  events(scope: ActivityReadScope, query: ActivityEventQuery): Promise<ActivityStorePage>;
  /** Coverage of every collector in the read scope (optionally one collector), ordered by scope then collector. */
  coverage(scope: ActivityReadScope, collectorId?: string): Promise<ActivityCollectorCoverage[]>;
  /** Deletes at most `maxRows` events ingested before `beforeMs`; resolves to how many went. */
  prune(beforeMs: number, maxRows: number): Promise<number>;
  close(): Promise<void>;
}
