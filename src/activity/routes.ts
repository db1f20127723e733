/**
 * Activity routes (spec 4.12; README "Activity store"), on both listeners:
 *
 *   POST /api/v2/activity/ingest    activity.ingest (admin)  {events: [...]} → 200 ack, after the durable commit
 *   GET  /api/v2/activity/events    activity.read            page of events in ingest order + coverage
 *   GET  /api/v2/activity/coverage  activity.read            coverage without rows
 *
 * Every route resolves its caller through OperatorIdentity. Scope travels in headers (spec part 5):
 * X-Svc-Tenant-Id, X-Svc-Host-Id, X-Svc-Instance-Id and X-Svc-Agent-Id on all three, plus
 * X-Svc-Collector-Id on ingest; each event's scope must equal them. On reads, host, instance and
 * agent may be `*` (every value; our extension for fleet-wide views); the tenant is always exact.
 * Query parameters the routes do not know are refused: a misspelt filter must not silently
 * return everything.
 */
import type { Counter } from 'prom-client';
import type { OperatorIdentity } from '../auth/operator-identity.js';
import { SvcError } from '../core/errors.js';
import { parseIntParam, parseStringParam } from '../http/body.js';
import type { Router } from '../http/router.js';
import type { RequestView } from '../http/types.js';
import {
  ACTIVITY_SCHEMA_VERSION,
  type ActivityCoverageResponse,
  type ActivityEventPage,
  type ActivityIngestAck,
} from '../wire/activity.js';
import { ACTIVITY_ID_RE, ActivityLimits, validateBatch, type ActivityScope } from './record.js';
import { ANY_SCOPE, type ActivityEventFilter, type ActivityReadScope, type ActivityStore } from './store.js';

export interface ActivityRouteDeps {
  readonly store: ActivityStore;
  readonly identity: OperatorIdentity;
  /** svc_activity_ingest_requests_total{outcome}: `acknowledged` or the error code. */
  readonly requests: Counter<'outcome'>;
  /** svc_activity_events_total{result}: accepted | duplicate. */
  readonly events: Counter<'result'>;
}

const SCOPE_HEADERS = [
  ['tenant_id', 'x-svc-tenant-id'],
  ['host_id', 'x-svc-host-id'],
  ['instance_id', 'x-svc-instance-id'],
  ['agent_id', 'x-svc-agent-id'],
] as const;
const COLLECTOR_HEADER = 'x-svc-collector-id';

const HEADER_NAME: Record<string, string> = {
  'x-svc-tenant-id': 'X-Svc-Tenant-Id',
  'x-svc-host-id': 'X-Svc-Host-Id',
  'x-svc-instance-id': 'X-Svc-Instance-Id',
  'x-svc-agent-id': 'X-Svc-Agent-Id',
  'x-svc-collector-id': 'X-Svc-Collector-Id',
};

function scopeHeader(req: RequestView, header: string, wildcard: boolean): string {
  const v = req.headers[header];
  const name = HEADER_NAME[header] ?? header;
  if (v === undefined || v === '') throw new SvcError('activity.scope_header_missing', `the ${name} header is required`, { header: name });
  if (wildcard && v === ANY_SCOPE) return v;
  if (!ACTIVITY_ID_RE.test(v))
    throw new SvcError(
      'activity.scope_header_missing',
      `the ${name} header must be an id (letters, digits and . _ : @ / + -, at most 256)`,
      {
        header: name,
      },
    );
  return v;
}

/** The five scope headers of an ingest request, all exact. */
export function ingestScopeOf(req: RequestView): ActivityScope {
  const s = Object.fromEntries(SCOPE_HEADERS.map(([k, h]) => [k, scopeHeader(req, h, false)])) as Omit<ActivityScope, 'collector_id'>;
  return { ...s, collector_id: scopeHeader(req, COLLECTOR_HEADER, false) };
}

/** The four scope headers of a read; host, instance and agent may be `*`. */
export function readScopeOf(req: RequestView): ActivityReadScope {
  const tenant = scopeHeader(req, 'x-svc-tenant-id', false);
  return {
    tenant_id: tenant,
    host_id: scopeHeader(req, 'x-svc-host-id', true),
    instance_id: scopeHeader(req, 'x-svc-instance-id', true),
    agent_id: scopeHeader(req, 'x-svc-agent-id', true),
  };
}

const ID_FILTERS = [
  'event_name',
  'collector_id',
  'session_id',
  'mission_id',
  'task_id',
  'tool_call_id',
  'command_id',
  'process_id',
  'trace_id',
] as const;
const EVENTS_PARAMS: readonly string[] = [...ID_FILTERS, 'collector', 'since', 'until', 'limit', 'cursor'];
const COVERAGE_PARAMS: readonly string[] = ['collector_id', 'collector'];

function onlyKnownParams(query: URLSearchParams, known: readonly string[]): void {
  for (const k of new Set(query.keys()))
    if (!known.includes(k))
      throw new SvcError('request.invalid', `unknown query parameter ${k.slice(0, 64)}: this route takes ${known.join(', ')}`);
}

/** A time bound: an RFC 3339 time or epoch milliseconds. */
function timeParam(query: URLSearchParams, name: string): number | undefined {
  const raw = parseStringParam(query, name, { maxLength: 64 });
  if (raw === undefined) return undefined;
  const ms = /^\d{1,16}$/.test(raw) ? Number(raw) : /^\d{4}-\d{2}-\d{2}T/.test(raw) ? Date.parse(raw) : NaN;
  if (!Number.isFinite(ms)) throw new SvcError('request.invalid', `query parameter ${name} must be an RFC 3339 time or epoch milliseconds`);
  return ms;
}

/** `collector_id`, or the reference's `collector` (not both). */
function collectorParam(query: URLSearchParams): string | undefined {
  const a = parseStringParam(query, 'collector_id', { maxLength: 256, pattern: ACTIVITY_ID_RE });
  const b = parseStringParam(query, 'collector', { maxLength: 256, pattern: ACTIVITY_ID_RE });
  if (a !== undefined && b !== undefined && a !== b) throw new SvcError('request.invalid', 'collector and collector_id differ: give one');
  return a ?? b;
}

function filterOf(query: URLSearchParams): ActivityEventFilter {
  const f: { -readonly [K in keyof ActivityEventFilter]: ActivityEventFilter[K] } = {};
  for (const k of ID_FILTERS) {
    if (k === 'collector_id') continue;
    const v = parseStringParam(query, k, { maxLength: 256, pattern: k === 'event_name' ? /^[a-z0-9_.]+$/ : ACTIVITY_ID_RE });
    if (v !== undefined) f[k] = v;
  }
  const collector = collectorParam(query);
  if (collector !== undefined) f['collector_id'] = collector;
  const since = timeParam(query, 'since');
  const until = timeParam(query, 'until');
  if (since !== undefined) f['since_ms'] = since;
  if (until !== undefined) f['until_ms'] = until;
  if (since !== undefined && until !== undefined && since > until) throw new SvcError('request.invalid', 'since is after until');
  return f;
}

export function registerActivityRoutes(router: Router, d: ActivityRouteDeps): void {
  const { store, identity } = d;

  router.add({
    method: 'POST',
    path: '/api/v2/activity/ingest',
    maxBodyBytes: ActivityLimits.maxBatchBytes,
    handler: async (req) => {
      try {
        identity.require(req, 'activity.ingest');
        const scope = ingestScopeOf(req);
        const events = validateBatch(req.body, scope);
        const ack: ActivityIngestAck = await store.ingest(scope, events);
        d.requests.inc({ outcome: 'acknowledged' });
        d.events.inc({ result: 'accepted' }, ack.accepted);
        d.events.inc({ result: 'duplicate' }, ack.duplicates);
        return { status: 200, json: ack };
      } catch (err) {
        d.requests.inc({ outcome: err instanceof SvcError ? err.code : 'server.internal' });
        throw err;
      }
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v2/activity/events',
    handler: async (req) => {
      identity.require(req, 'activity.read');
      const scope = readScopeOf(req);
      onlyKnownParams(req.query, EVENTS_PARAMS);
      const filter = filterOf(req.query);
      const limit = parseIntParam(req.query, 'limit', {
        min: 1,
        max: ActivityLimits.maxPageLimit,
        default: ActivityLimits.defaultPageLimit,
      });
      const cursor = parseStringParam(req.query, 'cursor', { maxLength: 256 });
      const [page, coverage] = await Promise.all([
        store.events(scope, { ...filter, limit, ...(cursor === undefined ? {} : { cursor }) }),
        store.coverage(scope, filter.collector_id),
      ]);
      const json: ActivityEventPage = { schema_version: ACTIVITY_SCHEMA_VERSION, ...page, coverage };
      return { status: 200, json };
    },
  });

  router.add({
    method: 'GET',
    path: '/api/v2/activity/coverage',
    handler: async (req) => {
      identity.require(req, 'activity.read');
      const scope = readScopeOf(req);
      onlyKnownParams(req.query, COVERAGE_PARAMS);
      const json: ActivityCoverageResponse = {
        schema_version: ACTIVITY_SCHEMA_VERSION,
        coverage: await store.coverage(scope, collectorParam(req.query)),
      };
      return { status: 200, json };
    },
  });
}
