/**
 * activity.event/v1 validation (src/activity/record.ts) and its published JSON Schema: they agree
 * on every shape; the secret and content key tables refuse every listed key, spelt any way, at any
 * depth, naming the field; lookalikes that are plain metadata (input_tokens, author) pass.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import {
  CONTENT_KEY_WORDS,
  SECRET_KEY_WORDS,
  SECRET_VALUE_PATTERNS,
  canonicalJson,
  validateBatch,
  validateEvent,
} from '../../../src/activity/record.js';
import { SvcError } from '../../../src/core/errors.js';
import { activityEvent, kTestScope } from '../../support/activity-events.js';
import { repoRoot } from '../../support/paths.js';

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const schema = JSON.parse(readFileSync(join(repoRoot, 'src', 'activity', 'activity-event-v1.schema.json'), 'utf8')) as { $id: string };
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv, ['date-time']);
ajv.addSchema(schema);
const schemaAccepts = ajv.getSchema(schema.$id)!;
const batchSchemaAccepts = ajv.getSchema(`${schema.$id}#/$defs/Batch`)!;

function refusal(fn: () => unknown): SvcError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof SvcError, String(err));
    return err;
  }
  assert.fail('accepted');
}

const ok = () => activityEvent(kTestScope, 1);
const clone = <T>(v: T): T => structuredClone(v);

/** Shape mutations: what changes, the field the refusal must name. */
/** A record whose nested objects the mutations may change. */
type Ev = Record<string, unknown> & Record<'source' | 'correlation' | 'outcome' | 'integrity', Record<string, unknown>>;

const MUTATIONS: [string, (e: Ev) => void, string][] = [
  ['unknown top-level field', (e) => (e['extra'] = 1), 'event.extra'],
  ['wrong schema_version', (e) => (e['schema_version'] = 'activity.event/v2'), 'schema_version'],
  ['event_id not a UUID', (e) => (e['event_id'] = 'evt-1'), 'event_id'],
  ['event_id upper-case', (e) => (e['event_id'] = String(e['event_id']).toUpperCase()), 'event_id'],
  ['event_name one word', (e) => (e['event_name'] = 'started'), 'event_name'],
  ['event_name upper-case', (e) => (e['event_name'] = 'Command.Started'), 'event_name'],
  ['plane unknown', (e) => (e['plane'] = 'kernel'), 'plane'],
  ['occurred_at not a time', (e) => (e['occurred_at'] = 'yesterday'), 'occurred_at'],
  ['observed_at without zone', (e) => (e['observed_at'] = '2026-11-01T10:00:00'), 'observed_at'],
  ['source missing', (e) => delete (e as Record<string, unknown>)['source'], 'source'],
  ['source.layer unknown', (e) => (e['source'].layer = 'cloud'), 'source.layer'],
  ['source extra field', (e) => (e['source'].pid = 3), 'source.pid'],
  ['negative clock error', (e) => (e['source'].clock_error_ms = -1), 'source.clock_error_ms'],
  ['correlation.agent_id missing', (e) => delete e['correlation'].agent_id, 'correlation.agent_id'],
  ['correlation id with a space', (e) => (e['correlation'].session_id = 'a b'), 'correlation.session_id'],
  ['trace_id not hex', (e) => (e['correlation'].trace_id = 'z'.repeat(32)), 'correlation.trace_id'],
  ['span_id wrong length', (e) => (e['correlation'].span_id = 'a'.repeat(15)), 'correlation.span_id'],
  ['correlation extra field', (e) => (e['correlation'].user = 'x'), 'correlation.user'],
  ['outcome status unknown', (e) => (e['outcome'].status = 'ok'), 'outcome.status'],
  ['outcome exit_code fraction', (e) => (e['outcome'].exit_code = 1.5), 'outcome.exit_code'],
  ['actor without id', (e) => (e['actor'] = { type: 'user' }), 'actor.id'],
  ['retention_class unknown', (e) => (e['retention_class'] = 'forever'), 'retention_class'],
  ['payload an array', (e) => (e['payload'] = []), 'payload'],
  ['integrity sequence 0', (e) => (e['integrity'].collector_sequence = 0), 'integrity.collector_sequence'],
  ['integrity sequence a string', (e) => (e['integrity'].collector_sequence = '1'), 'integrity.collector_sequence'],
  ['integrity extra field', (e) => (e['integrity'].nonce = 'x'), 'integrity.nonce'],
];

void describe('activity.event/v1: the validator and the JSON Schema agree', () => {
  void test('a well-formed record passes both, and canonical JSON ignores key order', () => {
    const e = ok();
    assert.ok(schemaAccepts(e), JSON.stringify(schemaAccepts.errors));
    const v = validateEvent(e, 0, kTestScope);
    const reversed = Object.fromEntries(Object.entries(e).reverse());
    assert.equal(validateEvent(reversed, 0, kTestScope).canonical, v.canonical);
    assert.equal(canonicalJson({ b: 1, a: [{ d: 1, c: 2 }] }), '{"a":[{"c":2,"d":1}],"b":1}');
  });

  for (const [what, mutate, field] of MUTATIONS) {
    void test(`${what}: refused by both, naming ${field}`, () => {
      const e = clone(ok()) as Ev;
      mutate(e);
      assert.equal(schemaAccepts(e), false, 'the schema accepts it');
      const err = refusal(() => validateEvent(e, 3, kTestScope));
      assert.equal(err.code, 'activity.event_invalid');
      assert.equal(err.details?.['field'], field);
      assert.equal(err.details?.['event_index'], 3);
      assert.equal(err.httpStatus, 400);
    });
  }

  void test('sensitivity: restricted content and secret-prohibited records are refused with their own codes', () => {
    for (const [sensitivity, code] of [
      ['restricted-content', 'activity.restricted_content'],
      ['secret-prohibited', 'activity.secret_prohibited'],
    ] as const) {
      const e = { ...ok(), sensitivity };
      assert.equal(schemaAccepts(e), false);
      const err = refusal(() => validateEvent(e, 0, kTestScope));
      assert.equal(err.code, code);
      assert.equal(err.details?.['field'], 'sensitivity');
    }
  });

  void test('scope: each event must carry the request scope; the refusal names the event and the field', () => {
    for (const [field, change] of [
      ['correlation.tenant_id', { correlation: { ...kTestScope, tenant_id: 'other' } }],
      ['correlation.host_id', { correlation: { ...kTestScope, host_id: 'other' } }],
      ['correlation.instance_id', { correlation: { ...kTestScope, instance_id: 'other' } }],
      ['correlation.agent_id', { correlation: { ...kTestScope, agent_id: 'other' } }],
    ] as const) {
      const { collector_id: _c, ...corr } = change.correlation;
      const bad: Record<string, unknown> = { ...activityEvent(kTestScope, 2), correlation: corr };
      const err = refusal(() => validateBatch({ events: [activityEvent(kTestScope, 1), bad] }, kTestScope));
      assert.equal(err.code, 'activity.scope_mismatch');
      assert.equal(err.details?.['field'], field);
      assert.equal(err.details?.['event_index'], 1);
      assert.equal(err.details?.['event_id'], bad['event_id']);
    }
    const other = activityEvent({ ...kTestScope, collector_id: 'guest' }, 1);
    const err = refusal(() => validateBatch({ events: [other] }, kTestScope));
    assert.equal(err.code, 'activity.scope_mismatch');
    assert.equal(err.details?.['field'], 'source.collector');
  });

  void test('batch bounds: empty, over 1000 events (413), a repeated event_id, an unknown body field', () => {
    assert.equal(refusal(() => validateBatch({ events: [] }, kTestScope)).code, 'request.invalid');
    const many = Array.from({ length: 1001 }, (_, i) => activityEvent(kTestScope, i + 1));
    const big = refusal(() => validateBatch({ events: many }, kTestScope));
    assert.equal(big.code, 'activity.batch_too_large');
    assert.equal(big.httpStatus, 413);
    assert.equal(batchSchemaAccepts({ events: many }), false);
    assert.equal(validateBatch({ events: many.slice(0, 1000) }, kTestScope).length, 1000);
    const e = ok();
    const twice = refusal(() => validateBatch({ events: [e, { ...e, integrity: { collector_sequence: 2 } }] }, kTestScope));
    assert.equal(twice.details?.['field'], 'event_id');
    assert.equal(refusal(() => validateBatch({ events: [e], extra: 1 }, kTestScope)).code, 'request.invalid');
  });

  void test('payload bounds: at most 8192 bytes of JSON, 8 levels, strings of 1024', () => {
    const big = { ...ok(), payload: { a: 'x'.repeat(1000), b: 'x'.repeat(1000), c: Array.from({ length: 8 }, () => 'y'.repeat(1000)) } };
    assert.equal(refusal(() => validateEvent(big, 0, kTestScope)).details?.['field'], 'payload');
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 8; i++) deep = { d: deep };
    assert.equal(refusal(() => validateEvent({ ...ok(), payload: deep }, 0, kTestScope)).code, 'activity.event_invalid');
    const long = refusal(() => validateEvent({ ...ok(), payload: { note: 'z'.repeat(1025) } }, 0, kTestScope));
    assert.equal(long.details?.['field'], 'payload.note');
  });
});

/** A key's spellings: snake, camel, kebab, upper, with a prefix. */
function spellings(words: readonly string[]): string[] {
  const camel = words.map((w, i) => (i === 0 ? w : w[0]!.toUpperCase() + w.slice(1))).join('');
  return [words.join('_'), camel, words.join('-').toUpperCase(), `x_${words.join('_')}`, `db.${words.join('_')}`];
}

/** `key: value` nested `depth` levels down, alternating objects and arrays. */
function nested(key: string, value: unknown, depth: number): { payload: Record<string, unknown>; path: string } {
  let payload: Record<string, unknown> = { [key]: value };
  let path = `.${key}`;
  for (let d = 1; d < depth; d++) {
    if (d % 2 === 1) {
      payload = { list: [0, payload] };
      path = `.list[1]${path}`;
    } else {
      payload = { level: payload };
      path = `.level${path}`;
    }
  }
  return { payload, path: `payload${path}` };
}

void describe('activity.event/v1: secrets and content never get in', () => {
  for (const words of SECRET_KEY_WORDS) {
    void test(`secret key ${words.join('_')}: refused at any depth in any spelling, field named`, () => {
      for (const key of spellings(words))
        for (const depth of [1, 2, 3, 5]) {
          const { payload, path } = nested(key, 'value', depth);
          const err = refusal(() => validateEvent({ ...ok(), payload }, 0, kTestScope));
          assert.equal(err.code, 'activity.secret_field', `${key} at depth ${depth}`);
          assert.equal(err.details?.['field'], path);
        }
    });
  }

  for (const words of CONTENT_KEY_WORDS) {
    void test(`content key ${words.join('_')}: refused as restricted content`, () => {
      for (const key of spellings(words)) {
        const { payload, path } = nested(key, 'x', 3);
        const err = refusal(() => validateEvent({ ...ok(), payload }, 0, kTestScope));
        assert.equal(err.code, 'activity.restricted_content', key);
        assert.equal(err.details?.['field'], path);
      }
    });
  }

  void test('secret-looking values are refused under any key, and the message does not repeat them', () => {
    const samples = [
      '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg...\n-----END PRIVATE KEY-----',
      '-----BEGIN RSA PRIVATE KEY-----\nabc',
      '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA',
      'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig',
      'Basic dXNlcjpwYXNzd29yZA==',
    ];
    assert.equal(SECRET_VALUE_PATTERNS.length, 4);
    for (const value of samples) {
      const { payload, path } = nested('note', value, 4);
      const err = refusal(() => validateEvent({ ...ok(), payload }, 0, kTestScope));
      assert.equal(err.code, 'activity.secret_field', value.slice(0, 30));
      assert.equal(err.details?.['field'], path);
      assert.ok(!err.message.includes(value.slice(12, 30)), 'the secret is not in the message');
    }
  });

  void test('metadata that only looks like it passes: token counts, authors, environment-free names', () => {
    const payload = {
      input_tokens: 1200,
      output_tokens: 300,
      tokens: 5,
      author: 'ci',
      secretary: 'no',
      passage: 2,
      tool: { name: 'bash', argv0: 'make', exit_code: 0 },
      key_count: 3,
      keyboard_layout: 'us',
      note: 'uses a Bearer token header (described, not included)',
    };
    const v = validateEvent({ ...ok(), payload }, 0, kTestScope);
    assert.deepEqual(v.event.payload, payload);
  });
});
