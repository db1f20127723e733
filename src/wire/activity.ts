/**
 * The activity store's wire shapes (spec 4.12, schema activity.event/v1). The spec names the record's
 * fields only in part (filter names, scope headers, event_id and sequence semantics); we take the
 * envelope the reference implementation publishes for the same schema id, so a collector written
 * for it posts unchanged (README "Activity store" lists the differences: scope travels in the
 * spec's X-Svc-* headers, and the acknowledgement and the event page carry more than it does).
 * The JSON Schema is src/activity/activity-event-v1.schema.json; a test keeps it equal to the
 * validator in src/activity/record.ts.
 */

export const ACTIVITY_SCHEMA_VERSION = 'activity.event/v1';

export type ActivityPlane = 'session' | 'action' | 'network' | 'runtime' | 'system' | 'integrity';
export type ActivitySourceLayer = 'guest' | 'runtime' | 'host' | 'control-plane' | 'provider';
export type ActivityRuntime = 'qemu-kvm' | 'cloud-hypervisor' | 'docker' | 'host' | 'unknown';
export type ActivitySourceTrust = 'observed' | 'attested' | 'self-reported' | 'derived';
export type ActivityOutcomeStatus = 'started' | 'success' | 'failure' | 'allowed' | 'denied' | 'degraded' | 'unknown';
/** Only `metadata` is stored; the other two are refused by ingest (activity.restricted_content, activity.secret_prohibited). */
export type ActivitySensitivity = 'metadata' | 'restricted-content' | 'secret-prohibited';
export type ActivityRetentionClass = 'standard' | 'security' | 'forensic-hold' | 'ephemeral';

export interface ActivitySource {
  /** Equal to the X-Svc-Collector-Id header of the ingest request. */
  collector: string;
  layer: ActivitySourceLayer;
  runtime: ActivityRuntime;
  trust: ActivitySourceTrust;
  clock_id?: string;
  clock_error_ms?: number;
}

/** Scope (tenant, host, instance, agent: equal to the scope headers) and the optional correlation ids. */
export interface ActivityCorrelation {
  tenant_id: string;
  host_id: string;
  instance_id: string;
  agent_id: string;
  session_id?: string;
  mission_id?: string;
  task_id?: string;
  tool_call_id?: string;
  command_id?: string;
  process_id?: string;
  parent_event_id?: string;
  /** W3C trace id: 32 lowercase hex. */
  trace_id?: string;
  /** W3C span id: 16 lowercase hex. */
  span_id?: string;
}

export interface ActivityEntity {
  type: string;
  id: string;
  uid?: number;
  gid?: number;
  pid?: number;
}

export interface ActivityOutcome {
  status: ActivityOutcomeStatus;
  exit_code?: number;
  reason?: string;
}

export interface ActivityIntegrity {
  /** The collector's sequence number, from 1, increasing by one per event of one collector. */
  collector_sequence: number;
  source_hash?: string;
  source_previous_hash?: string;
  timeline_hash?: string;
  timeline_previous_hash?: string;
  signature?: string;
  key_id?: string;
}

/** One activity.event/v1 record, as ingested and as returned by GET /api/v2/activity/events. */
export interface ActivityEvent {
  schema_version: typeof ACTIVITY_SCHEMA_VERSION;
  /** A UUID (the producer's; UUIDv7 recommended), unique across the store. */
  event_id: string;
  /** Dotted lowercase words, at least two: `command.started`, `tool.call_finished`. */
  event_name: string;
  plane: ActivityPlane;
  /** RFC 3339 times: when it happened (the producer's clock) and when the collector saw it. */
  occurred_at: string;
  observed_at: string;
  source: ActivitySource;
  correlation: ActivityCorrelation;
  actor?: ActivityEntity;
  target?: ActivityEntity;
  outcome?: ActivityOutcome;
  sensitivity: ActivitySensitivity;
  retention_class: ActivityRetentionClass;
  /** Bounded metadata (README "Activity store" has the bounds). Never content, never secrets. */
  payload: Record<string, unknown>;
  integrity: ActivityIntegrity;
}

/** The body of POST /api/v2/activity/ingest. */
export interface ActivityIngestBatch {
  events: ActivityEvent[];
}

/** A run of sequence numbers a collector skipped (recorded durably; shown in coverage). */
export interface ActivitySequenceGap {
  collector_id: string;
  first_missing_sequence: number;
  last_missing_sequence: number;
}

/** A sequence jump seen by one ingest: the collector's next sequence was `expected`, the event had `got`. */
export interface ActivitySequenceJump {
  collector_id: string;
  event_id: string;
  expected: number;
  got: number;
}

/** The acknowledgement of POST /api/v2/activity/ingest, sent only after the transaction committed. */
export interface ActivityIngestAck {
  schema_version: typeof ACTIVITY_SCHEMA_VERSION;
  /** Count of events stored by this request (the reference's field). */
  accepted: number;
  /** Count of events whose event_id was already stored with the same content (no second row). */
  duplicates: number;
  accepted_event_ids: string[];
  duplicate_event_ids: string[];
  /** Highest n such that the collector's sequences 1..n are all stored or recorded as gaps. */
  durable_through_sequence: number;
  /** Gaps this request recorded (the reference's field). */
  sequence_gaps_recorded: ActivitySequenceGap[];
  /** The same jumps, as expected/got per event. */
  sequence_jumps: ActivitySequenceJump[];
}

/** Per-collector coverage (GET /api/v2/activity/coverage, and with every event page). */
export interface ActivityCollectorCoverage {
  tenant_id: string;
  host_id: string;
  instance_id: string;
  agent_id: string;
  collector_id: string;
  event_count: number;
  first_sequence: number | null;
  last_sequence: number | null;
  durable_through_sequence: number;
  /** Earliest and latest occurred_at of the stored events. */
  first_occurred_at: string | null;
  last_occurred_at: string | null;
  /** When the last batch of this collector was committed (server clock). */
  last_ingested_at: string | null;
  /** Every gap ever recorded for this collector (durable loss records). */
  sequence_gaps: ActivitySequenceGap[];
  jump_count: number;
}

export interface ActivityCoverageResponse {
  schema_version: typeof ACTIVITY_SCHEMA_VERSION;
  coverage: ActivityCollectorCoverage[];
}

/** GET /api/v2/activity/events. */
export interface ActivityEventPage {
  schema_version: typeof ACTIVITY_SCHEMA_VERSION;
  events: ActivityEvent[];
  /** The event_id to pass as `cursor` for the next page; null when this page is empty. */
  next_cursor: string | null;
  has_more: boolean;
  /** null without a cursor; false when the cursor names no stored event (the page starts from the beginning). */
  cursor_found: boolean | null;
  coverage: ActivityCollectorCoverage[];
}

/**
 * The stores' query behind GET /api/v2/activity/events: all optional, exact matches; the times
 * are occurred_at bounds, inclusive, in epoch ms (the route's since/until parameters, parsed).
 */
export interface ActivityEventFilter {
  readonly event_name?: string;
  readonly collector_id?: string;
  readonly session_id?: string;
  readonly mission_id?: string;
  readonly task_id?: string;
  readonly tool_call_id?: string;
  readonly command_id?: string;
  readonly process_id?: string;
  readonly trace_id?: string;
  /** Epoch milliseconds. */
  readonly since_ms?: number;
  readonly until_ms?: number;
}

export interface ActivityEventQuery extends ActivityEventFilter {
  /** 1 to ActivityLimits.maxPageLimit (the route validates). */
  readonly limit: number;
  /** The previous page's next_cursor (an event_id). */
  readonly cursor?: string;
}
