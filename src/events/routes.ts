/**
 * Events v1 (spec 4.5): POST /api/v1/events (the VM event bridge's ingest) and
 * GET /api/v1/events (recent events, filters, and a live tail with follow=true).
 *
 * GET query (all optional): since (an event id: only newer events; or, where it is not an integer,
 * an RFC 3339 date-time: only events whose timestamp is after it), event_type (exact, or a prefix
 * ending in `*` such as `agent.*`), agent_id, vm_name, limit (1-5000, default 100; the newest
 * matches, oldest first), follow (true: an SSE stream of `event` frames, starting after `since`).
 *
 * Every follow event goes out twice: as `event: event` with its id (what our clients read) and
 * right after as an unnamed `data:` frame, which an EventSource delivers to `onmessage` (what the
 * reference dashboard listens to; README "Compatibility with the reference dashboard"). Clients
 * that dispatch on the event name ignore the unnamed copy. A follower cut off as slow gets
 * `event: lagged` (the reference's resync signal) before the `event: error` slow-consumer frame.
 */
import { SvcError } from '../core/errors.js';
import type { EventPage, EventQuery, EventRecord, EventStore, StoredEvent } from './event-store.js';
import { parseBoolParam, parseIntParam, parseStringParam } from '../http/body.js';
import type { Router } from '../http/router.js';
import type { SseSink } from '../http/types.js';
import { LiveSubscriber } from '../http/live-subscriber.js';

const EVENT_TYPE_RE = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/;
const FIELDS = new Set(['event_type', 'vm_name', 'timestamp', 'details', 'agent_id', 'trace_id']);
const MAX_DETAILS_BYTES = 16 * 1024;
/** A follower more than this many bytes behind is dropped (it can resume with since=<last id>). */
const FOLLOW_MAX_BUFFERED_BYTES = 1024 * 1024;

/**
 * RFC 3339 `date-time` (section 5.6: full-date "T" full-time, the T and Z in either case, a
 * fraction of any length, `Z` or a numeric offset; a leap second :60 counts as :59.999), as epoch
 * milliseconds rounded down, or undefined when `raw` is not one. Each field is range-checked
 * (2026-02-30 is not a date), unlike Date.parse.
 */
export function parseRfc3339(raw: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.exec(raw);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const fractionMs = m[7] === undefined ? 0 : Math.floor(Number(`0${m[7]}`) * 1000);
  const zone = m[8] as string;
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 60) return undefined;
  let offsetMinutes = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (zone.startsWith('-') ? -1 : 1) * (oh * 60 + om);
  }
  const leap = second === 60;
  const utc = Date.UTC(year, month - 1, day, hour, minute, leap ? 59 : second, leap ? 999 : fractionMs);
  return utc - offsetMinutes * 60_000;
}

/**
 * The `since` cursor: an event id where the value is an integer (spec 4.5's cursor; negative is
 * 400 as before), else an RFC 3339 date-time; anything else is 400 `request.invalid` naming since.
 */
function parseSince(query: URLSearchParams): { since?: number; sinceMs?: number } {
  const raw = parseStringParam(query, 'since', { maxLength: 64 });
  if (raw === undefined) return {};
  if (/^-?\d+$/.test(raw)) return { since: parseIntParam(query, 'since', { min: 0, default: 0 }) };
  const sinceMs = parseRfc3339(raw);
  if (sinceMs === undefined) {
    throw new SvcError(
      'request.invalid',
      'query parameter since must be an event id (an integer, at least 0) or an RFC 3339 date-time such as 2026-01-01T00:00:00Z',
    );
  }
  return { sinceMs };
}

/** Whether an event's timestamp is after `sinceMs` (the RFC 3339 form of since). */
function after(e: StoredEvent, sinceMs: number): boolean {
  return Date.parse(e.timestamp) > sinceMs;
}

export function registerEventRoutes(router: Router, deps: { events: EventStore }): void {
  router.add({
    method: 'POST',
    path: '/api/v1/events',
    maxBodyBytes: 64 * 1024,
    handler: (req) => {
      deps.events.append(validateEventRecord(req.body), 'api');
      return { status: 200, json: { received: true } };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v1/events',
    handler: (req) => {
      const { since, sinceMs } = parseSince(req.query);
      const eventType = parseStringParam(req.query, 'event_type', { maxLength: 128, pattern: /^[a-z0-9_.]+\*?$/ });
      const agentId = parseStringParam(req.query, 'agent_id', { maxLength: 256 });
      const vmName = parseStringParam(req.query, 'vm_name', { maxLength: 256 });
      const limit = parseIntParam(req.query, 'limit', { min: 1, max: 5000, default: 100 });
      const follow = parseBoolParam(req.query, 'follow', { default: false });
      const filter = {
        ...(since !== undefined ? { since } : {}),
        ...(eventType !== undefined ? { eventType } : {}),
        ...(agentId !== undefined ? { agentId } : {}),
        ...(vmName !== undefined ? { vmName } : {}),
      };
      if (sinceMs !== undefined) {
        if (!follow) return { status: 200, json: queryAfterTime(deps.events, filter, sinceMs, limit) };
        return { sse: (sink) => followEvents(deps.events, sink, { ...filter, sinceMs }, limit) };
      }
      if (!follow) return { status: 200, json: deps.events.query({ ...filter, limit }) };
      return { sse: (sink) => followEvents(deps.events, sink, filter, limit) };
    },
  });
}

/**
 * The list for an RFC 3339 since: the retained matches whose timestamp is after it (the newest
 * `limit`, oldest first); total_count counts them all, last_event_id is the store's as usual.
 */
function queryAfterTime(store: EventStore, filter: Omit<EventQuery, 'limit' | 'since'>, sinceMs: number, limit: number): EventPage {
  const page = store.query({ ...filter, limit: Number.MAX_SAFE_INTEGER });
  const matches = page.events.filter((e) => after(e, sinceMs));
  return { events: matches.slice(Math.max(0, matches.length - limit)), total_count: matches.length, last_event_id: page.last_event_id };
}

/** The events follow's slow-consumer frame: resume with since = the last id it got. */
function slowFollowFrame(cursor: string | undefined): string {
  const data = JSON.stringify({
    code: 'slow_subscriber',
    message: 'subscriber fell behind; resume with since',
    since: Number(cursor ?? 0),
  });
  return `event: lagged\ndata: ${data}\n\nevent: error\ndata: ${data}\n\n`;
}

/**
 * follow=true, per the live-subscriber rules (src/http/live-subscriber.ts): the stored events
 * after `since` (an id; or an RFC 3339 time, then the events whose timestamp is after it, stored
 * and live) read synchronously, so subscribing right after loses nothing, then live ones; a
 * follower more than FOLLOW_MAX_BUFFERED_BYTES behind gets the slow frame and is closed.
 */
function followEvents(
  store: EventStore,
  sink: SseSink,
  filter: { since?: number; sinceMs?: number; eventType?: string; agentId?: string; vmName?: string },
  limit: number,
): void {
  const { sinceMs, ...idFilter } = filter;
  const matches = (e: StoredEvent): boolean =>
    (sinceMs === undefined || after(e, sinceMs)) &&
    (filter.agentId === undefined || e.agent_id === filter.agentId) &&
    (filter.vmName === undefined || e.vm_name === filter.vmName) &&
    (filter.eventType === undefined ||
      (filter.eventType.endsWith('*') ? e.event_type.startsWith(filter.eventType.slice(0, -1)) : e.event_type === filter.eventType));
  const frame = (e: StoredEvent): { frame: string; cursor: string } => {
    const data = JSON.stringify(e);
    return { frame: `id: ${e.id}\nevent: event\ndata: ${data}\n\ndata: ${data}\n\n`, cursor: String(e.id) };
  };
  let lastId = filter.since ?? 0;
  let replay: StoredEvent[] = [];
  // The cursor reported if it is cut off before any write: where an integer since resumes.
  let cursor = lastId;
  if (filter.since !== undefined) {
    replay = store.query({ ...idFilter, limit }).events;
    lastId = replay.at(-1)?.id ?? lastId;
  } else if (sinceMs !== undefined) {
    // Every retained event was looked at: live ones start after the newest id, sent or not.
    const page = queryAfterTime(store, idFilter, sinceMs, limit);
    replay = page.events;
    lastId = page.last_event_id;
    cursor = replay.length > 0 ? (replay[0] as StoredEvent).id - 1 : lastId;
  }
  const sub = new LiveSubscriber(sink, { maxQueuedBytes: FOLLOW_MAX_BUFFERED_BYTES, slowFrame: slowFollowFrame, cursor: String(cursor) });
  if (replay.length > 0) sub.sendReplay(replay.map(frame));
  const unsubscribe = store.subscribe((e) => {
    if (e.id <= lastId || !matches(e)) return;
    lastId = e.id;
    const f = frame(e);
    sub.send(f.frame, f.cursor);
  });
  sub.onClose(unsubscribe);
}

/** Validates a POSTed event record; unknown fields and wrong types are 400 with the field named. */
export function validateEventRecord(body: unknown): Partial<EventRecord> & { event_type: string } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new SvcError('request.invalid', 'body must be a JSON object (an event record)');
  }
  const rec = body as Record<string, unknown>;
  const unknown = Object.keys(rec).filter((k) => !FIELDS.has(k));
  if (unknown.length > 0) throw new SvcError('request.invalid', `unknown field(s): ${unknown.join(', ')}`);
  const out: Partial<EventRecord> & { event_type: string } = { event_type: '' };
  if (typeof rec['event_type'] !== 'string' || !EVENT_TYPE_RE.test(rec['event_type']) || rec['event_type'].length > 128) {
    throw new SvcError('request.invalid', 'event_type must be a dotted lower-case name such as vm.started');
  }
  out.event_type = rec['event_type'];
  for (const k of ['vm_name', 'agent_id'] as const) {
    const v = rec[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string' || v.length > 256) throw new SvcError('request.invalid', `${k} must be a string of at most 256 characters`);
    out[k] = v;
  }
  const ts = rec['timestamp'];
  if (ts !== undefined) {
    if (
      typeof ts !== 'string' ||
      !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(ts) ||
      Number.isNaN(Date.parse(ts))
    ) {
      throw new SvcError('request.invalid', 'timestamp must be an ISO 8601 date-time such as 2026-01-01T00:00:00Z');
    }
    out.timestamp = new Date(ts).toISOString();
  }
  const details = rec['details'];
  if (details !== undefined) {
    if (typeof details !== 'object' || details === null || Array.isArray(details))
      throw new SvcError('request.invalid', 'details must be an object');
    if (JSON.stringify(details).length > MAX_DETAILS_BYTES)
      throw new SvcError('request.invalid', `details must be at most ${MAX_DETAILS_BYTES} bytes of JSON`);
    out.details = details as Record<string, unknown>;
  }
  const trace = rec['trace_id'];
  if (trace !== undefined && trace !== null) {
    if (typeof trace !== 'string' || trace.length > 128) throw new SvcError('request.invalid', 'trace_id must be a string or null');
    out.trace_id = trace;
  } else if (trace === null) {
    out.trace_id = null;
  }
  return out;
}
