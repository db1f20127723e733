import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SvcError } from '../../../src/core/errors.js';
import { renderError } from '../../../src/http/dispatch.js';
import { canonicalJson, IdempotencyCache, parseIdempotencyKey, requestHash } from '../../../src/sessions/idempotency.js';
import { SessionStore } from '../../../src/sessions/session-store.js';

const h1 = requestHash('POST', '/api/v1/agents/a/sessions', { command: 'bash' });
const h2 = requestHash('POST', '/api/v1/agents/a/sessions', { command: 'htop' });

function deferred<T>(): { promise: Promise<T>; resolve(v: T): void; reject(e: unknown): void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('IdempotencyCache', () => {
  test('same key and body: the stored response, marked replayed, without running again', async () => {
    const cache = new IdempotencyCache();
    let runs = 0;
    const fn = (): Promise<{ status: number; json: unknown }> => Promise.resolve({ status: 200, json: { session_id: `s${++runs}` } });
    const first = await cache.run('a', 'k1', h1, fn);
    const again = await cache.run('a', 'k1', h1, fn);
    assert.deepEqual(first, { status: 200, json: { session_id: 's1' }, replayed: false });
    assert.deepEqual(again, { status: 200, json: { session_id: 's1' }, replayed: true });
    assert.equal(runs, 1);
    assert.deepEqual((await cache.run('b', 'k1', h1, fn)).json, { session_id: 's2' }, 'another scope is another binding');
    assert.equal((await cache.run('a', undefined, h1, fn)).replayed, false, 'no key: always runs');
  });

  test('same key, different body: 409 idempotency.key_conflict', async () => {
    const cache = new IdempotencyCache();
    await cache.run('a', 'k', h1, () => Promise.resolve({ status: 200, json: {} }));
    await assert.rejects(
      cache.run('a', 'k', h2, () => Promise.resolve({ status: 200, json: {} })),
      (e: unknown) => e instanceof SvcError && e.code === 'idempotency.key_conflict' && e.httpStatus === 409,
    );
  });

  test('a duplicate while the first runs: 409 idempotency.in_progress with Retry-After 1', async () => {
    const cache = new IdempotencyCache();
    const gate = deferred<{ status: number; json: unknown }>();
    const first = cache.run('a', 'k', h1, () => gate.promise);
    const err = await cache.run('a', 'k', h1, () => Promise.resolve({ status: 200, json: {} })).catch((e: unknown) => e);
    assert.ok(err instanceof SvcError && err.code === 'idempotency.in_progress');
    const rendered = renderError(err);
    assert.equal(rendered.status, 409);
    assert.equal(rendered.headers['retry-after'], '1');
    await assert.rejects(
      cache.run('a', 'k', h2, () => Promise.resolve({ status: 200, json: {} })),
      (e: unknown) => e instanceof SvcError && e.code === 'idempotency.key_conflict',
    );
    gate.resolve({ status: 200, json: { ok: 1 } });
    assert.equal((await first).replayed, false);
    assert.equal((await cache.run('a', 'k', h1, () => Promise.reject(new Error('not run')))).replayed, true);
  });

  test('a failed original releases the key: the retry really runs', async () => {
    const cache = new IdempotencyCache();
    await assert.rejects(cache.run('a', 'k', h1, () => Promise.reject(new SvcError('server.unavailable', 'agent away'))));
    const r = await cache.run('a', 'k', h1, () => Promise.resolve({ status: 200, json: { n: 2 } }));
    assert.deepEqual(r, { status: 200, json: { n: 2 }, replayed: false });
  });

  test('bindings expire after the TTL (24 h by default) and the oldest go past maxEntries', async () => {
    let now = 1_000_000;
    const cache = new IdempotencyCache({ now: () => now, maxEntries: 3 });
    assert.equal(cache.ttlMs, 24 * 3600 * 1000);
    let n = 0;
    const fn = (): Promise<{ status: number; json: unknown }> => Promise.resolve({ status: 200, json: { n: ++n } });
    await cache.run('a', 'k', h1, fn);
    now += 24 * 3600 * 1000 - 1;
    assert.equal((await cache.run('a', 'k', h1, fn)).replayed, true);
    now += 1;
    assert.equal((await cache.run('a', 'k', h1, fn)).replayed, false);
    for (const k of ['k2', 'k3', 'k4']) await cache.run('a', k, h1, fn);
    assert.equal(cache.size, 3);
    assert.equal((await cache.run('a', 'k', h1, fn)).replayed, false, 'the oldest binding was evicted');
  });

  test('with a store, bindings survive a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-idem-'));
    try {
      const s1 = new SessionStore(dir);
      await new IdempotencyCache({ store: s1 }).run('a', 'k', h1, () => Promise.resolve({ status: 200, json: { session_id: 'x' } }));
      s1.close();
      const s2 = new SessionStore(dir);
      const r = await new IdempotencyCache({ store: s2 }).run('a', 'k', h1, () => Promise.reject(new Error('must not run')));
      assert.deepEqual(r, { status: 200, json: { session_id: 'x' }, replayed: true });
      s2.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

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

  test('the request hash ignores key order and whitespace (canonical JSON), not values (property)', () => {
    assert.equal(requestHash('POST', '/p', { a: 1, b: 'x' }), requestHash('post', '/p', JSON.parse('{ "b": "x",  "a": 1 }')));
    assert.equal(requestHash('POST', '/p', undefined), requestHash('POST', '/p', {}));
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (o) => {
        const reversed = Object.fromEntries(Object.entries(o).reverse());
        assert.equal(canonicalJson(o), canonicalJson(reversed));
        assert.deepEqual(JSON.parse(canonicalJson(o)), JSON.parse(JSON.stringify(o)));
      }),
    );
  });
});
