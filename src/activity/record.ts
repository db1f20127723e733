/**
 * Validation of activity.event/v1 records (spec 4.12, part 5) before any transaction begins: the
 * shape (unknown fields refused at every level), the scope (each event's tenant, host, instance,
 * agent and collector equal the request's scope headers), and the metadata-only rule: restricted
 * content, records marked secret-prohibited, and keys or values that commonly carry secrets are
 * refused with a code per reason and the offending field's path, so nothing that looks like a
 * secret is ever stored.
 *
 * A batch is all or nothing: the first bad event refuses the batch, naming its index and event_id.
 */
import { SvcError, type ErrorCode } from '../core/errors.js';
import { canonicalJson } from '../util/canonical-json.js';
import {
  ACTIVITY_SCHEMA_VERSION,
  type ActivityEvent,
  type ActivityOutcomeStatus,
  type ActivityPlane,
  type ActivityRetentionClass,
  type ActivityRuntime,
  type ActivitySensitivity,
  type ActivitySourceLayer,
  type ActivitySourceTrust,
} from '../wire/activity.js';

export { canonicalJson };

/** Bounds (README "Activity store"; spec part 8 leaves them to us). */
export const ActivityLimits = {
  /** Events in one ingest batch (413 activity.batch_too_large beyond). */
  maxBatchEvents: 1000,
  /** Bytes of one ingest body (413 request.body_too_large beyond). */
  maxBatchBytes: 4 * 1024 * 1024,
  /** Bytes of one event's payload, as JSON. */
  maxPayloadBytes: 8 * 1024,
  /** Nesting depth of the payload (the payload object itself is depth 1). */
  maxPayloadDepth: 8,
  /** Length of a string anywhere in an event (ids, names, payload values). */
  maxStringLength: 1024,
  /** Length of ids and scope values. */
  maxIdLength: 256,
  /** Events page: default and maximum `limit` (spec part 8: at most 5000). */
  defaultPageLimit: 100,
  maxPageLimit: 5000,
} as const;

/** The scope of one ingest request: its five X-Svc-* headers. */
export interface ActivityScope {
  readonly tenant_id: string;
  readonly host_id: string;
  readonly instance_id: string;
  readonly agent_id: string;
  readonly collector_id: string;
}

/** An event that passed validation, with its canonical JSON (sorted keys: replays compare equal; computed on first read). */
export interface ValidatedEvent {
  readonly event: ActivityEvent;
  readonly canonical: string;
}

/**
 * Keys that commonly carry secrets. A payload key (at any depth) is refused with
 * activity.secret_field when its words (split at `_`, `-`, `.`, spaces and camelCase) contain one of
 * these word sequences. Matching by words, not substrings, keeps `input_tokens` or `token_count`
 * apart from `token`... except where the word itself is the secret's name.
 */
export const SECRET_KEY_WORDS: readonly (readonly string[])[] = [
  ['password'],
  ['passwd'],
  ['passphrase'],
  ['pwd'],
  ['secret'],
  ['secrets'],
  ['token'],
  ['authorization'],
  ['auth', 'header'],
  ['bearer'],
  ['api', 'key'],
  ['apikey'],
  ['access', 'key'],
  ['private', 'key'],
  ['privatekey'],
  ['secret', 'key'],
  ['session', 'key'],
  ['signing', 'key'],
  ['credential'],
  ['credentials'],
  ['cookie'],
  ['cookies'],
  ['set', 'cookie'],
  ['connection', 'string'],
  ['dsn'],
];

/**
 * Keys that name content rather than metadata: refused with activity.restricted_content. The
 * activity store is metadata only; content (what was typed, printed, read, sent) has no place in it.
 */
export const CONTENT_KEY_WORDS: readonly (readonly string[])[] = [
  ['prompt'],
  ['keystrokes'],
  ['stdin'],
  ['stdout'],
  ['stderr'],
  ['file', 'content'],
  ['file', 'contents'],
  ['packet', 'payload'],
  ['env'],
  ['environment'],
  ['transcript'],
];

/** Values that are secrets whatever their key is called: refused with activity.secret_field. */
export const SECRET_VALUE_PATTERNS: readonly { readonly name: string; readonly re: RegExp }[] = [
  { name: 'PEM private key', re: /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/ },
  { name: 'OpenSSH private key', re: /-----BEGIN OPENSSH PRIVATE KEY-----/ },
  { name: 'HTTP bearer credential', re: /^\s*Bearer\s+[A-Za-z0-9._~+/=-]{8,}/i },
  { name: 'HTTP basic credential', re: /^\s*Basic\s+[A-Za-z0-9+/=]{8,}\s*$/i },
];

const PLANES: readonly ActivityPlane[] = ['session', 'action', 'network', 'runtime', 'system', 'integrity'];
const LAYERS: readonly ActivitySourceLayer[] = ['guest', 'runtime', 'host', 'control-plane', 'provider'];
const RUNTIMES: readonly ActivityRuntime[] = ['qemu-kvm', 'cloud-hypervisor', 'docker', 'host', 'unknown'];
const TRUSTS: readonly ActivitySourceTrust[] = ['observed', 'attested', 'self-reported', 'derived'];
const OUTCOMES: readonly ActivityOutcomeStatus[] = ['started', 'success', 'failure', 'allowed', 'denied', 'degraded', 'unknown'];
const SENSITIVITIES: readonly ActivitySensitivity[] = ['metadata', 'restricted-content', 'secret-prohibited'];
const RETENTION: readonly ActivityRetentionClass[] = ['standard', 'security', 'forensic-hold', 'ephemeral'];

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const EVENT_NAME_RE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
/** Scope values and correlation ids: printable, no spaces, bounded. */
export const ACTIVITY_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,255}$/;
const RFC3339_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

const EVENT_FIELDS = [
  'schema_version',
  'event_id',
  'event_name',
  'plane',
  'occurred_at',
  'observed_at',
  'source',
  'correlation',
  'actor',
  'target',
  'outcome',
  'sensitivity',
  'retention_class',
  'payload',
  'integrity',
] as const;
const SOURCE_FIELDS = ['collector', 'layer', 'runtime', 'trust', 'clock_id', 'clock_error_ms'] as const;
const SCOPE_FIELDS = ['tenant_id', 'host_id', 'instance_id', 'agent_id'] as const;
const CORRELATION_IDS = ['session_id', 'mission_id', 'task_id', 'tool_call_id', 'command_id', 'process_id'] as const;
const CORRELATION_FIELDS = [...SCOPE_FIELDS, ...CORRELATION_IDS, 'parent_event_id', 'trace_id', 'span_id'] as const;
const ENTITY_FIELDS = ['type', 'id', 'uid', 'gid', 'pid'] as const;
const OUTCOME_FIELDS = ['status', 'exit_code', 'reason'] as const;
const INTEGRITY_FIELDS = [
  'collector_sequence',
  'source_hash',
  'source_previous_hash',
  'timeline_hash',
  'timeline_previous_hash',
  'signature',
  'key_id',
] as const;

/** Where in a batch the refusal happened, for the error's details. */
interface At {
  readonly index: number;
  readonly eventId: string | null;
}

function refuse(code: ErrorCode, at: At, field: string, message: string): SvcError {
  return new SvcError(code, `events[${at.index}]${at.eventId === null ? '' : ` (${at.eventId})`}: ${field}: ${message}`, {
    event_index: at.index,
    event_id: at.eventId,
    field,
  });
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function objectOf(v: unknown, at: At, field: string, fields: readonly string[]): Obj {
  if (!isObj(v)) throw refuse('activity.event_invalid', at, field, 'must be an object');
  for (const k of Object.keys(v))
    if (!fields.includes(k))
      throw refuse('activity.event_invalid', at, `${field}.${k}`, `unknown field (${field} has ${fields.join(', ')})`);
  return v;
}

function str(o: Obj, key: string, at: At, path: string, opts: { re?: RegExp; optional?: boolean; what?: string } = {}): string | undefined {
  const v = o[key];
  if (v === undefined && opts.optional === true) return undefined;
  if (typeof v !== 'string') throw refuse('activity.event_invalid', at, path, v === undefined ? 'is required' : 'must be a string');
  if (v.length > ActivityLimits.maxStringLength)
    throw refuse('activity.event_invalid', at, path, `is longer than ${ActivityLimits.maxStringLength}`);
  if (opts.re !== undefined && !opts.re.test(v)) throw refuse('activity.event_invalid', at, path, `must be ${opts.what ?? 'well formed'}`);
  return v;
}

function oneOf<T extends string>(o: Obj, key: string, at: At, path: string, values: readonly T[], optional = false): T | undefined {
  const v = o[key];
  if (v === undefined && optional) return undefined;
  if (typeof v !== 'string' || !(values as readonly string[]).includes(v))
    throw refuse('activity.event_invalid', at, path, `must be one of ${values.join(', ')}`);
  return v as T;
}

function int(o: Obj, key: string, at: At, path: string, min: number, optional = false): number | undefined {
  const v = o[key];
  if (v === undefined && optional) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    throw refuse('activity.event_invalid', at, path, `must be an integer of at least ${min}`);
  return v;
}

function time(o: Obj, key: string, at: At, path: string): string {
  const v = str(o, key, at, path, { re: RFC3339_RE, what: 'an RFC 3339 time' }) as string;
  if (Number.isNaN(Date.parse(v))) throw refuse('activity.event_invalid', at, path, 'must be an RFC 3339 time');
  return v;
}

/** The words of a key: `apiKey` → api key, `X-Api-Key` → x api key, `db.password` → db password. */
export function keyWords(key: string): string[] {
  return key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 0);
}

function containsRun(words: readonly string[], run: readonly string[]): boolean {
  outer: for (let i = 0; i + run.length <= words.length; i++) {
    for (let j = 0; j < run.length; j++) if (words[i + j] !== run[j]) continue outer;
    return true;
  }
  return false;
}

/** The table entry a key matches, if any: `secret` (SECRET_KEY_WORDS) or `content` (CONTENT_KEY_WORDS). */
export function classifyKey(key: string): 'secret' | 'content' | null {
  const known = kKeyClasses.get(key);
  if (known !== undefined) return known;
  const words = keyWords(key);
  const cls = SECRET_KEY_WORDS.some((run) => containsRun(words, run))
    ? 'secret'
    : CONTENT_KEY_WORDS.some((run) => containsRun(words, run))
      ? 'content'
      : null;
  // Collectors send the same few keys over and over: remember them (bounded; cleared when full).
  if (kKeyClasses.size >= kMaxKnownKeys) kKeyClasses.clear();
  kKeyClasses.set(key, cls);
  return cls;
}

/** classifyKey's memory: key → class, at most kMaxKnownKeys keys. */
const kKeyClasses = new Map<string, 'secret' | 'content' | null>();
const kMaxKnownKeys = 4096;

/** Walks the payload: depth, string lengths, secret and content keys, secret-looking values. */
function checkPayload(v: unknown, at: At, path: string, depth: number): void {
  if (typeof v === 'string') {
    if (v.length > ActivityLimits.maxStringLength)
      throw refuse('activity.event_invalid', at, path, `is longer than ${ActivityLimits.maxStringLength}`);
    for (const p of SECRET_VALUE_PATTERNS)
      if (p.re.test(v)) throw refuse('activity.secret_field', at, path, `holds what looks like a ${p.name}`);
    return;
  }
  if (v === null || typeof v === 'boolean') return;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw refuse('activity.event_invalid', at, path, 'must be a finite number');
    return;
  }
  if (depth >= ActivityLimits.maxPayloadDepth)
    throw refuse('activity.event_invalid', at, path, `nests deeper than ${ActivityLimits.maxPayloadDepth}`);
  if (Array.isArray(v)) {
    v.forEach((item, i) => checkPayload(item, at, `${path}[${i}]`, depth + 1));
    return;
  }
  if (!isObj(v)) throw refuse('activity.event_invalid', at, path, 'must be JSON');
  for (const [k, item] of Object.entries(v)) {
    const p = `${path}.${k}`;
    const kind = classifyKey(k);
    if (kind === 'secret')
      throw refuse('activity.secret_field', at, p, 'is a key that carries secrets; the activity store keeps metadata only');
    if (kind === 'content')
      throw refuse('activity.restricted_content', at, p, 'is a key that carries content; the activity store keeps metadata only');
    checkPayload(item, at, p, depth + 1);
  }
}

function entity(v: unknown, at: At, path: string): void {
  const o = objectOf(v, at, path, ENTITY_FIELDS);
  str(o, 'type', at, `${path}.type`, { re: ACTIVITY_ID_RE, what: 'an id' });
  str(o, 'id', at, `${path}.id`);
  for (const k of ['uid', 'gid', 'pid'] as const) int(o, k, at, `${path}.${k}`, 0, true);
}

/**
 * Validates one event of a batch against the request's scope. Throws SvcError (400) with
 * details {event_index, event_id, field}: activity.event_invalid, activity.scope_mismatch,
 * activity.restricted_content, activity.secret_prohibited or activity.secret_field.
 */
export function validateEvent(raw: unknown, index: number, scope: ActivityScope): ValidatedEvent {
  const at0: At = { index, eventId: null };
  const o = objectOf(raw, at0, 'event', EVENT_FIELDS);
  const eventId = str(o, 'event_id', at0, 'event_id', { re: UUID_RE, what: 'a lowercase UUID' }) as string;
  const at: At = { index, eventId };
  if (o['schema_version'] !== ACTIVITY_SCHEMA_VERSION)
    throw refuse('activity.event_invalid', at, 'schema_version', `must be ${ACTIVITY_SCHEMA_VERSION}`);
  // Sensitivity first: a record marked as content or secret is refused for that, whatever else it holds.
  const sensitivity = oneOf(o, 'sensitivity', at, 'sensitivity', SENSITIVITIES);
  if (sensitivity === 'restricted-content')
    throw refuse('activity.restricted_content', at, 'sensitivity', 'restricted content is not accepted by the metadata store');
  if (sensitivity === 'secret-prohibited')
    throw refuse('activity.secret_prohibited', at, 'sensitivity', 'the record is marked secret-prohibited; it was not stored');
  str(o, 'event_name', at, 'event_name', { re: EVENT_NAME_RE, what: 'dotted lowercase words (command.started)' });
  oneOf(o, 'plane', at, 'plane', PLANES);
  time(o, 'occurred_at', at, 'occurred_at');
  time(o, 'observed_at', at, 'observed_at');
  oneOf(o, 'retention_class', at, 'retention_class', RETENTION);

  const source = objectOf(o['source'], at, 'source', SOURCE_FIELDS);
  str(source, 'collector', at, 'source.collector', { re: ACTIVITY_ID_RE, what: 'an id' });
  oneOf(source, 'layer', at, 'source.layer', LAYERS);
  oneOf(source, 'runtime', at, 'source.runtime', RUNTIMES);
  oneOf(source, 'trust', at, 'source.trust', TRUSTS);
  str(source, 'clock_id', at, 'source.clock_id', { optional: true, re: ACTIVITY_ID_RE, what: 'an id' });
  const clockError = source['clock_error_ms'];
  if (clockError !== undefined && (typeof clockError !== 'number' || !Number.isFinite(clockError) || clockError < 0))
    throw refuse('activity.event_invalid', at, 'source.clock_error_ms', 'must be a finite number of at least 0');

  const corr = objectOf(o['correlation'], at, 'correlation', CORRELATION_FIELDS);
  for (const k of SCOPE_FIELDS) str(corr, k, at, `correlation.${k}`, { re: ACTIVITY_ID_RE, what: 'an id' });
  for (const k of CORRELATION_IDS) str(corr, k, at, `correlation.${k}`, { optional: true, re: ACTIVITY_ID_RE, what: 'an id' });
  str(corr, 'parent_event_id', at, 'correlation.parent_event_id', { optional: true, re: UUID_RE, what: 'a lowercase UUID' });
  str(corr, 'trace_id', at, 'correlation.trace_id', { optional: true, re: HEX32, what: '32 lowercase hex digits' });
  str(corr, 'span_id', at, 'correlation.span_id', { optional: true, re: HEX16, what: '16 lowercase hex digits' });

  if (o['actor'] !== undefined) entity(o['actor'], at, 'actor');
  if (o['target'] !== undefined) entity(o['target'], at, 'target');
  if (o['outcome'] !== undefined) {
    const out = objectOf(o['outcome'], at, 'outcome', OUTCOME_FIELDS);
    oneOf(out, 'status', at, 'outcome.status', OUTCOMES);
    const exit = out['exit_code'];
    if (exit !== undefined && (typeof exit !== 'number' || !Number.isInteger(exit)))
      throw refuse('activity.event_invalid', at, 'outcome.exit_code', 'must be an integer');
    str(out, 'reason', at, 'outcome.reason', { optional: true });
  }

  const integrity = objectOf(o['integrity'], at, 'integrity', INTEGRITY_FIELDS);
  int(integrity, 'collector_sequence', at, 'integrity.collector_sequence', 1);
  for (const k of INTEGRITY_FIELDS.slice(1)) str(integrity, k, at, `integrity.${k}`, { optional: true });

  if (!isObj(o['payload'])) throw refuse('activity.event_invalid', at, 'payload', 'must be an object');
  checkPayload(o['payload'], at, 'payload', 1);
  const payloadBytes = Buffer.byteLength(JSON.stringify(o['payload']));
  if (payloadBytes > ActivityLimits.maxPayloadBytes)
    throw refuse('activity.event_invalid', at, 'payload', `is ${payloadBytes} bytes of JSON; at most ${ActivityLimits.maxPayloadBytes}`);

  // Scope last: the event is well formed, and now must belong to the request's scope.
  const mismatch =
    SCOPE_FIELDS.find((k) => corr[k] !== scope[k]) !== undefined
      ? `correlation.${SCOPE_FIELDS.find((k) => corr[k] !== scope[k])}`
      : source['collector'] !== scope.collector_id
        ? 'source.collector'
        : null;
  if (mismatch !== null) throw refuse('activity.scope_mismatch', at, mismatch, 'differs from the request scope headers (X-Svc-*-Id)');

  const event = o as unknown as ActivityEvent;
  // Made on first use: only a store that keeps or compares it (PostgreSQL; SQLite's worker makes its own on a replay) pays for it.
  let canonical: string | undefined;
  return {
    event,
    get canonical(): string {
      return (canonical ??= canonicalJson(event));
    },
  };
}

/**
 * Validates a whole ingest body `{events: [...]}`: 413 activity.batch_too_large beyond
 * maxBatchEvents, 400 for an empty batch, a repeated event_id within the batch, or any bad event.
 */
export function validateBatch(body: unknown, scope: ActivityScope): ValidatedEvent[] {
  if (!isObj(body)) throw new SvcError('request.invalid', 'the body must be a JSON object {events: [...]}');
  const extra = Object.keys(body).filter((k) => k !== 'events');
  if (extra.length > 0) throw new SvcError('request.invalid', `unknown field(s) ${extra.slice(0, 5).join(', ')}: the body has only events`);
  const events = body['events'];
  if (!Array.isArray(events)) throw new SvcError('request.invalid', 'events must be an array of activity.event/v1 records');
  if (events.length === 0) throw new SvcError('request.invalid', 'events is empty: a batch holds 1 to 1000 events');
  if (events.length > ActivityLimits.maxBatchEvents)
    throw new SvcError('activity.batch_too_large', `the batch holds ${events.length} events; at most ${ActivityLimits.maxBatchEvents}`, {
      events: events.length,
      max_events: ActivityLimits.maxBatchEvents,
    });
  const seen = new Set<string>();
  return events.map((raw, i) => {
    const v = validateEvent(raw, i, scope);
    if (seen.has(v.event.event_id))
      throw refuse('activity.event_invalid', { index: i, eventId: v.event.event_id }, 'event_id', 'appears twice in the batch');
    seen.add(v.event.event_id);
    return v;
  });
}
