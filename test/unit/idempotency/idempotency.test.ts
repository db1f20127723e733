import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { SvcError } from '../../../src/core/errors.js';
import { renderError } from '../../../src/http/dispatch.js';
import { BindingStore, MemoryBindingStore, type BoundResponse } from '../../../src/idempotency/binding-store.js';
import {
  Idempotency,
  JSON_ANSWER_CODEC,
  MAX_BOUND_BODY_BYTES,
  parseIdempotencyKey,
  requestHash,
  type BindingCodec,
  type IdempotencyOutcome,
} from '../../../src/idempotency/idempotency.js';
import { canonicalJson } from '../../../src/util/canonical-json.js';

const h1 = requestHash('POST', '/api/v1/agents/a/sessions', { json: { command: 'bash' } });
const h2 = requestHash('POST', '/api/v1/agents/a/sessions', { json: { command: 'htop' } });
type Answer = { status: number; json: unknown };
const ok = (json: unknown): Promise<Answer> => Promise.resolve({ status: 200, json });

function deferred<T>(): { promise: Promise<T>; resolve(v: T): void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((res) => (resolve = res));
  return { promise, resolve };
}

function withDir(fn: (dir: string) => Promise<void> | void): () => Promise<void> {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-idem-'));
    try {
      await fn(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

describe('Idempotency', () => {
  test('same key and request: the stored answer, marked replayed, without running again; scopes are separate', async () => {
    const outcomes: IdempotencyOutcome[] = [];
    const idem = new Idempotency({ store: new MemoryBindingStore(), onOutcome: (o) => outcomes.push(o) });
    let runs = 0;
    const fn = (): Promise<Answer> => ok({ session_id: `s${++runs}` });
    const first = await idem.run('a', 'k1', h1, JSON_ANSWER_CODEC, fn);
    const again = await idem.run('a', 'k1', h1, JSON_ANSWER_CODEC, fn);
    assert.deepEqual(first, { result: { status: 200, json: { session_id: 's1' } }, replayed: false });
    assert.deepEqual(again, { result: { status: 200, json: { session_id: 's1' } }, replayed: true });
    assert.equal(runs, 1);
    assert.deepEqual((await idem.run('b', 'k1', h1, JSON_ANSWER_CODEC, fn)).result.json, { session_id: 's2' }, 'another scope');
    assert.equal((await idem.run('a', undefined, h1, JSON_ANSWER_CODEC, fn)).replayed, false, 'no key: always runs');
    assert.deepEqual(outcomes, ['bound', 'replayed', 'bound']);
  });

  test('same key, different request: 409 idempotency.key_conflict, before and while the original runs', async () => {
    const idem = new Idempotency({ store: new MemoryBindingStore() });
    const gate = deferred<Answer>();
    const running = idem.run('a', 'k', h1, JSON_ANSWER_CODEC, () => gate.promise);
    await assert.rejects(
      idem.run('a', 'k', h2, JSON_ANSWER_CODEC, () => ok({})),
      (e: unknown) => {
        return e instanceof SvcError && e.code === 'idempotency.key_conflict' && e.httpStatus === 409;
      },
    );
    gate.resolve({ status: 201, json: { n: 1 } });
    await running;
    await assert.rejects(
      idem.run('a', 'k', h2, JSON_ANSWER_CODEC, () => ok({})),
      (e: unknown) => {
        return e instanceof SvcError && e.code === 'idempotency.key_conflict';
      },
    );
  });

  test('a duplicate while the original runs: 409 idempotency.in_progress with Retry-After: 1, then the replay', async () => {
    const idem = new Idempotency({ store: new MemoryBindingStore() });
    const gate = deferred<Answer>();
    const first = idem.run('a', 'k', h1, JSON_ANSWER_CODEC, () => gate.promise);
    assert.equal(idem.running, 1);
    const err = await idem.run('a', 'k', h1, JSON_ANSWER_CODEC, () => ok({})).catch((e: unknown) => e);
    assert.ok(err instanceof SvcError && err.code === 'idempotency.in_progress');
    const rendered = renderError(err);
    assert.equal(rendered.status, 409);
    assert.equal(rendered.headers['retry-after'], '1');
    gate.resolve({ status: 202, json: { ok: 1 } });
    assert.equal((await first).replayed, false);
    const replay = await idem.run('a', 'k', h1, JSON_ANSWER_CODEC, () => Promise.reject(new Error('not run')));
    assert.deepEqual(replay, { result: { status: 202, json: { ok: 1 } }, replayed: true });
    assert.equal(idem.running, 0);
  });

  test('a failed original releases the key (the retry really runs); non-2xx, streamed and oversized answers are not bound', async () => {
    const outcomes: IdempotencyOutcome[] = [];
    const idem = new Idempotency({ store: new MemoryBindingStore(), onOutcome: (o) => outcomes.push(o) });
    await assert.rejects(idem.run('a', 'k', h1, JSON_ANSWER_CODEC, () => Promise.reject(new SvcError('server.unavailable', 'agent away'))));
    assert.deepEqual(await idem.run('a', 'k', h1, JSON_ANSWER_CODEC, () => ok({ n: 2 })), {
      result: { status: 200, json: { n: 2 } },
      replayed: false,
    });
    await idem.run('a', 'k3', h1, JSON_ANSWER_CODEC, () => Promise.resolve({ status: 404, json: {} }));
    assert.equal((await idem.run('a', 'k3', h1, JSON_ANSWER_CODEC, () => ok({}))).replayed, false, 'a 404 was not bound');
    const stream: BindingCodec<string> = { toResponse: () => null, fromResponse: () => 'never' };
    await idem.run('a', 'k4', h1, stream, () => 'streamed');
    assert.equal((await idem.run('a', 'k4', h1, stream, () => 'again')).result, 'again');
    const big = 'x'.repeat(MAX_BOUND_BODY_BYTES);
    await idem.run('a', 'k5', h1, JSON_ANSWER_CODEC, () => ok(big));
    assert.equal((await idem.run('a', 'k5', h1, JSON_ANSWER_CODEC, () => ok('small'))).replayed, false);
    assert.deepEqual(outcomes, ['released', 'bound', 'unbound', 'bound', 'unbound', 'unbound', 'unbound', 'bound']);
  });

  test(
    'bindings are durable: status, headers and body bytes come back after a restart, until 24 h after the answer',
    withDir(async (dir) => {
      let now = 1_000_000;
      const raw: BindingCodec<BoundResponse> = { toResponse: (r) => r, fromResponse: (r) => r };
      const answer: BoundResponse = {
        status: 202,
        headers: { location: '/api/v2/admin/operations/op-1' },
        contentType: 'application/json; charset=utf-8',
        body: new TextEncoder().encode('{"operation_id":"op-1", "b":[1,2]}'),
      };
      const s1 = new BindingStore(dir);
      await new Idempotency({ store: s1, now: () => now }).run('operator:mtls:alice', 'k', h1, raw, () => answer);
      s1.close();
      const s2 = new BindingStore(dir);
      const idem = new Idempotency({ store: s2, now: () => now });
      assert.equal(idem.ttlMs, 24 * 3600 * 1000);
      const r = await idem.run('operator:mtls:alice', 'k', h1, raw, () => Promise.reject(new Error('must not run')));
      assert.equal(r.replayed, true);
      assert.equal(r.result.status, 202);
      assert.deepEqual(r.result.headers, answer.headers);
      assert.equal(r.result.contentType, answer.contentType);
      assert.deepEqual(Buffer.from(r.result.body), Buffer.from(answer.body));
      now += 24 * 3600 * 1000 - 1;
      assert.equal(s2.count(now), 1);
      assert.equal((await idem.run('operator:mtls:alice', 'k', h1, raw, () => answer)).replayed, true);
      now += 1;
      assert.equal(s2.count(now), 0);
      assert.equal(s2.sweep(now), 1);
      assert.equal((await idem.run('operator:mtls:alice', 'k', h2, raw, () => answer)).replayed, false, 'expired: the key is free');
      s2.close();
    }),
  );

  test(
    'a store written by a newer sandboxd is refused at open',
    withDir((dir) => {
      new BindingStore(dir).close();
      const db = new Database(join(dir, 'idempotency.db'));
      db.pragma('user_version = 99');
      db.close();
      assert.throws(() => new BindingStore(dir), /schema version 99, newer/);
    }),
  );

  test('the key header: absent → none; 1..255 visible ASCII; anything else 400', () => {
    assert.equal(parseIdempotencyKey({}), undefined);
    assert.equal(parseIdempotencyKey({ 'idempotency-key': 'a'.repeat(255) }), 'a'.repeat(255));
    for (const bad of ['', 'a'.repeat(256), 'has space', 'tab\t', 'ünï']) {
      assert.throws(
        () => parseIdempotencyKey({ 'idempotency-key': bad }),
        (e: unknown) => e instanceof SvcError && e.code === 'request.invalid',
      );
    }
  });

  test('the request hash: method, path with query and body count; JSON key order and whitespace do not (property)', () => {
    const hash = (m: string, p: string, json: unknown): string => requestHash(m, p, { json });
    assert.equal(hash('POST', '/p', { a: 1, b: 'x' }), hash('post', '/p', JSON.parse('{ "b": "x",  "a": 1 }')));
    assert.equal(hash('POST', '/p', undefined), hash('POST', '/p', {}));
    assert.notEqual(hash('POST', '/p', {}), hash('POST', '/p?x=1', {}));
    assert.notEqual(hash('POST', '/p', {}), hash('PUT', '/p', {}));
    assert.notEqual(requestHash('POST', '/p', { raw: Buffer.from('{}') }), hash('POST', '/p', {}));
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (o) => {
        const reversed = Object.fromEntries(Object.entries(o).reverse());
        assert.equal(canonicalJson(o), canonicalJson(reversed));
        assert.equal(hash('POST', '/p', o), hash('POST', '/p', reversed));
      }),
    );
  });
});
