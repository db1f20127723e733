import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SvcError } from '../../../src/core/errors.js';
import {
  BodyCollector,
  declaredBodyLength,
  isJsonContentType,
  parseBody,
  parseBoolParam,
  parseEnumParam,
  parseIntParam,
  parseStringParam,
} from '../../../src/http/body.js';

const JSON_HEADERS = { 'content-type': 'application/json' };
const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof SvcError, `expected SvcError, got ${String(err)}`);
    return err.code;
  }
  assert.fail('expected a throw');
}

void describe('parseBody', () => {
  void test('parses JSON on json routes', () => {
    assert.deepEqual(parseBody('json', JSON_HEADERS, enc('{"a":[1,2]}')), { a: [1, 2] });
    assert.deepEqual(parseBody('json', { 'content-type': 'application/json; charset=utf-8' }, enc('{}')), {});
    assert.equal(parseBody('json', { 'content-type': 'application/a2a+json' }, enc('1')), 1);
  });

  void test('an empty body is undefined (the handler decides)', () => {
    assert.equal(parseBody('json', {}, null), undefined);
    assert.equal(parseBody('json', {}, new Uint8Array(0)), undefined);
  });

  void test('a body without a JSON content type is 400 request.unsupported_media_type', () => {
    assert.equal(
      codeOf(() => parseBody('json', {}, enc('{}'))),
      'request.unsupported_media_type',
    );
    assert.equal(
      codeOf(() => parseBody('json', { 'content-type': 'text/plain' }, enc('{}'))),
      'request.unsupported_media_type',
    );
  });

  void test('malformed JSON and invalid UTF-8 are 400 request.malformed_json', () => {
    assert.equal(
      codeOf(() => parseBody('json', JSON_HEADERS, enc('{"a":'))),
      'request.malformed_json',
    );
    assert.equal(
      codeOf(() => parseBody('json', JSON_HEADERS, new Uint8Array([0x22, 0xff, 0x22]))),
      'request.malformed_json',
    );
  });

  void test('raw and none routes never parse', () => {
    assert.equal(parseBody('raw', {}, enc('not json')), undefined);
    assert.equal(parseBody('none', {}, enc('not json')), undefined);
  });

  void test('any bytes either parse or fail with a 400 code, never anything else', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        try {
          parseBody('json', JSON_HEADERS, bytes);
        } catch (err) {
          assert.ok(err instanceof SvcError && err.code === 'request.malformed_json');
        }
      }),
    );
  });

  void test('every JSON value round-trips', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = JSON.stringify(v);
        assert.deepEqual(parseBody('json', JSON_HEADERS, enc(text)), JSON.parse(text));
      }),
    );
  });
});

void describe('body size', () => {
  void test('a declared length over the limit is 413 before reading', () => {
    assert.equal(
      codeOf(() => declaredBodyLength({ 'content-length': '2000' }, 1000)),
      'request.body_too_large',
    );
    assert.equal(declaredBodyLength({ 'content-length': '1000' }, 1000), 1000);
    assert.equal(declaredBodyLength({}, 1000), undefined);
    assert.equal(
      codeOf(() => declaredBodyLength({ 'content-length': 'abc' }, 1000)),
      'request.invalid',
    );
  });

  void test('the collector joins chunks in order and refuses bytes past the limit', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 50 }), { maxLength: 10 }), fc.boolean(), (chunks, declare) => {
        const total = chunks.reduce((n, c) => n + c.byteLength, 0);
        const c = new BodyCollector(1000, declare ? total : undefined);
        for (const ch of chunks) assert.ok(c.push(ch.slice().buffer));
        const out = c.finish();
        const expected = Buffer.concat(chunks);
        if (total === 0) assert.equal(out, null);
        else assert.deepEqual(Buffer.from(out ?? []), expected);
      }),
    );
    const small = new BodyCollector(4);
    assert.ok(small.push(enc('1234')));
    assert.equal(small.push(enc('5')), false);
  });
});

void describe('content type', () => {
  void test('application/json and +json types are JSON', () => {
    assert.ok(isJsonContentType('application/json'));
    assert.ok(isJsonContentType('Application/JSON; charset=UTF-8'));
    assert.ok(isJsonContentType('application/merge-patch+json'));
    assert.ok(!isJsonContentType('text/json'));
    assert.ok(!isJsonContentType(undefined));
  });
});

void describe('query helpers', () => {
  const q = (s: string): URLSearchParams => new URLSearchParams(s);

  void test('parseIntParam: default, range, and errors naming the parameter', () => {
    assert.equal(parseIntParam(q(''), 'limit', { default: 50 }), 50);
    assert.equal(parseIntParam(q('limit=7'), 'limit', { min: 1, max: 100 }), 7);
    assert.equal(parseIntParam(q(''), 'limit'), undefined);
    for (const bad of ['limit=abc', 'limit=1.5', 'limit=1e3', 'limit=', 'limit=0', 'limit=101', 'limit=1&limit=2']) {
      assert.throws(
        () => parseIntParam(q(bad), 'limit', { min: 1, max: 100 }),
        (err: unknown) => err instanceof SvcError && err.code === 'request.invalid' && err.message.includes('limit'),
        bad,
      );
    }
  });

  void test('parseBoolParam, parseEnumParam, parseStringParam', () => {
    assert.equal(parseBoolParam(q('force=true'), 'force'), true);
    assert.equal(parseBoolParam(q('force=0'), 'force'), false);
    assert.equal(parseBoolParam(q(''), 'force', { default: false }), false);
    assert.equal(
      codeOf(() => parseBoolParam(q('force=yes'), 'force')),
      'request.invalid',
    );
    assert.equal(parseEnumParam(q('state=running'), 'state', ['running', 'failed'] as const), 'running');
    assert.equal(
      codeOf(() => parseEnumParam(q('state=x'), 'state', ['running'])),
      'request.invalid',
    );
    assert.equal(parseStringParam(q('name=agent-1'), 'name', { pattern: /^agent-[a-z0-9-]+$/ }), 'agent-1');
    assert.equal(
      codeOf(() => parseStringParam(q(''), 'name', { required: true })),
      'request.invalid',
    );
    assert.equal(
      codeOf(() => parseStringParam(q(`name=${'x'.repeat(20)}`), 'name', { maxLength: 10 })),
      'request.invalid',
    );
  });
});
