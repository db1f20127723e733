/**
 * The activity view's model: the filter (in the hash: `#/activity?command_id=…&agent=…`) as the
 * scope headers and the query of GET /api/v2/activity/events, the coverage of each collector as
 * table rows, and a one-line summary of an event.
 *
 * Order: the view lists events in ingest order, the store's stable paging order, oldest first;
 * "Load more" asks for the page after the last event shown (its cursor), so nothing is skipped or
 * shown twice while ingest goes on, and the same button later fetches what arrived since.
 */
import type { ActivityCollectorCoverage, ActivityEvent, ActivityQuery, ActivityReadScope } from '../../client/types.js';

/** The correlation filters, in the order the form shows them: [query key, label]. */
export const ACTIVITY_ID_FILTERS = [
  ['event_name', 'Event name'],
  ['session_id', 'Session'],
  ['mission_id', 'Mission'],
  ['task_id', 'Task'],
  ['tool_call_id', 'Tool call'],
  ['command_id', 'Command'],
  ['process_id', 'Process'],
  ['trace_id', 'Trace'],
] as const;

export type ActivityIdFilter = (typeof ACTIVITY_ID_FILTERS)[number][0];

export interface ActivityFilter {
  readonly ids: Readonly<Partial<Record<ActivityIdFilter, string>>>;
  /** `datetime-local` values (local time, `2026-11-27T09:30` or with seconds) or RFC 3339; empty for none. */
  readonly since: string;
  readonly until: string;
  /** Scope: `*` (or empty) for every agent / instance. */
  readonly agent: string;
  readonly instance: string;
}

/** Events per page the view asks for. */
export const ACTIVITY_PAGE_LIMIT = 100;

export const ANY = '*';

export function activityFilterFromQuery(q: URLSearchParams): ActivityFilter {
  const ids: Partial<Record<ActivityIdFilter, string>> = {};
  for (const [k] of ACTIVITY_ID_FILTERS) {
    const v = q.get(k)?.trim() ?? '';
    if (v !== '') ids[k] = v;
  }
  return {
    ids,
    since: q.get('since')?.trim() ?? '',
    until: q.get('until')?.trim() ?? '',
    agent: q.get('agent')?.trim() || ANY,
    instance: q.get('instance')?.trim() || ANY,
  };
}

/** The hash query of a filter (empty fields and `*` scopes left out). */
export function activityFilterToQuery(f: ActivityFilter): URLSearchParams {
  const q = new URLSearchParams();
  for (const [k] of ACTIVITY_ID_FILTERS) {
    const v = f.ids[k]?.trim() ?? '';
    if (v !== '') q.set(k, v);
  }
  if (f.since.trim() !== '') q.set('since', f.since.trim());
  if (f.until.trim() !== '') q.set('until', f.until.trim());
  if (f.agent.trim() !== '' && f.agent.trim() !== ANY) q.set('agent', f.agent.trim());
  if (f.instance.trim() !== '' && f.instance.trim() !== ANY) q.set('instance', f.instance.trim());
  return q;
}

/**
 * A time bound as the API takes it (RFC 3339, UTC), or null when it cannot be read. A
 * `datetime-local` value has no zone: it is the browser's local time.
 */
export function timeBound(v: string): string | null {
  const s = v.trim();
  if (s === '') return null;
  const ms = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(s) || /(Z|[+-]\d{2}:\d{2})$/.test(s) ? Date.parse(s) : NaN;
  return Number.isNaN(ms) ? null : new Date(ms).toISOString();
}

/** Why the filter cannot be sent (a bad time, since after until), or null. */
export function activityFilterProblem(f: ActivityFilter): string | null {
  const since = f.since.trim() === '' ? null : timeBound(f.since);
  const until = f.until.trim() === '' ? null : timeBound(f.until);
  if (f.since.trim() !== '' && since === null) return `"${f.since}" is not a time`;
  if (f.until.trim() !== '' && until === null) return `"${f.until}" is not a time`;
  if (since !== null && until !== null && Date.parse(since) > Date.parse(until)) return 'since is after until';
  return null;
}

/** The read scope (X-Svc-* headers) of a filter under `tenant` (host: every host). */
export function activityScope(f: ActivityFilter, tenant: string): ActivityReadScope {
  return { tenant_id: tenant, host_id: ANY, instance_id: f.instance || ANY, agent_id: f.agent || ANY };
}

/** The query of GET /api/v2/activity/events for a filter (a time that cannot be read is left out: activityFilterProblem says so). */
export function activityApiQuery(f: ActivityFilter, cursor?: string | null, limit = ACTIVITY_PAGE_LIMIT): ActivityQuery {
  const q: ActivityQuery = { limit };
  for (const [k] of ACTIVITY_ID_FILTERS) {
    const v = f.ids[k];
    if (v !== undefined && v !== '') q[k] = v;
  }
  const since = timeBound(f.since);
  const until = timeBound(f.until);
  if (since !== null) q.since = since;
  if (until !== null) q.until = until;
  if (cursor !== undefined && cursor !== null) q.cursor = cursor;
  return q;
}

/** A gap list: `3–5, 9` (at most `max` ranges, then `…`). */
export function gapsText(c: ActivityCollectorCoverage, max = 5): string {
  if (c.sequence_gaps.length === 0) return 'none';
  const ranges = c.sequence_gaps.map((g) =>
    g.first_missing_sequence === g.last_missing_sequence
      ? `${g.first_missing_sequence}`
      : `${g.first_missing_sequence}–${g.last_missing_sequence}`,
  );
  const missing = c.sequence_gaps.reduce((n, g) => n + g.last_missing_sequence - g.first_missing_sequence + 1, 0);
  return `${missing} missing: ${ranges.slice(0, max).join(', ')}${ranges.length > max ? ', …' : ''}`;
}

/** `1–120` (the collector's sequences seen), or `—`. */
export function sequencesText(c: ActivityCollectorCoverage): string {
  return c.first_sequence === null || c.last_sequence === null ? '—' : `${c.first_sequence}–${c.last_sequence}`;
}

/** The scope of a coverage row: `agent` alone when the instance is the agent id, else `agent @ instance`. */
export function coverageScopeText(c: Pick<ActivityCollectorCoverage, 'agent_id' | 'instance_id' | 'host_id'>): string {
  return `${c.agent_id}${c.instance_id === c.agent_id ? '' : ` @ ${c.instance_id}`} on ${c.host_id}`;
}

/** The correlation ids an event carries, as [label, value] (scope left out). */
export function correlationPairs(e: ActivityEvent): Array<[string, string]> {
  const c = e.correlation;
  const out: Array<[string, string]> = [];
  for (const [k, label] of ACTIVITY_ID_FILTERS) {
    if (k === 'event_name') continue;
    const v = c[k];
    if (typeof v === 'string' && v !== '') out.push([label.toLowerCase(), v]);
  }
  return out;
}

/** One line: the outcome (status, exit code, reason) and the payload's scalar fields. */
export function activitySummary(e: ActivityEvent): string {
  const parts: string[] = [];
  if (e.outcome !== undefined) {
    parts.push(e.outcome.status);
    if (e.outcome.exit_code !== undefined) parts.push(`exit ${e.outcome.exit_code}`);
    if (e.outcome.reason !== undefined && e.outcome.reason !== '') parts.push(e.outcome.reason);
  }
  for (const [k, v] of Object.entries(e.payload)) {
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') parts.push(`${k}=${String(v)}`);
    if (parts.length >= 8) break;
  }
  const s = parts.join(' · ');
  return s.length > 200 ? `${s.slice(0, 199)}…` : s;
}

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,255}$/;
const EVENT_NAME_RE = /^[a-z0-9_.]+$/;

/** Why a filter field would be refused by the server (its id rules), or null: checked before sending, so a typo is a form error, not a 400. */
export function activityFieldProblem(key: ActivityIdFilter | 'agent' | 'instance', value: string): string | null {
  const v = value.trim();
  if (v === '' || ((key === 'agent' || key === 'instance') && v === ANY)) return null;
  if (key === 'event_name') return EVENT_NAME_RE.test(v) ? null : 'lowercase letters, digits, _ and . only';
  return ID_RE.test(v) ? null : 'letters, digits and . _ : @ / + - only (no spaces), at most 256';
}
