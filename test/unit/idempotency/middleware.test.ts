import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OperatorIdentity } from '../../../src/auth/operator-identity.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import type { RequestPeer } from '../../../src/http/types.js';
import { MemoryBindingStore } from '../../../src/idempotency/binding-store.js';
import { Idempotency } from '../../../src/idempotency/idempotency.js';
import { idempotencyMiddleware, isIdempotentRoute } from '../../../src/idempotency/middleware.js';

const TD = 'sandboxd.test';
const alice: RequestPeer = { transport: 'mtls', spiffeId: `spiffe://${TD}/operator/alice`, fingerprint256: 'AA' };
const bob: RequestPeer = { transport: 'mtls', spiffeId: `spiffe://${TD}/operator/bob`, fingerprint256: 'BB' };
const stranger: RequestPeer = { transport: 'mtls', spiffeId: `spiffe://other.test/operator/eve`, fingerprint256: 'EE' };

function server() {
  const router = new Router();
  const identity = new OperatorIdentity({
    trustDomain: TD,
    localRole: 'admin',
    roles: () => ({
      ok: true,
      roles: new Map([
        ['alice', 'admin'],
        ['bob', 'admin'],
      ]),
    }),
  });
  router.use(idempotencyMiddleware({ idempotency: new Idempotency({ store: new MemoryBindingStore() }), identity }));
  let n = 0;
  const gates: (() => void)[] = [];
  router.add({
    method: 'POST',
    path: '/api/v2/admin/things',
    responseSchema: { type: 'object', properties: { id: { type: 'string' }, n: { type: 'integer' } } },
    handler: async (req) => {
      if ((req.body as { slow?: boolean } | undefined)?.slow === true) await new Promise<void>((r) => gates.push(r));
      if ((req.body as { fail?: boolean } | undefined)?.fail === true) throw new Error('boom');
      n++;
      return { status: 202, headers: { Location: `/api/v2/admin/operations/op-${n}` }, json: { id: `op-${n}`, n, dropped: 'x' } };
    },
  });
  router.add({ method: 'POST', path: '/api/v1/other', handler: () => ({ status: 200, json: { n: ++n } }) });
  return { router, runs: () => n, release: () => gates.splice(0).forEach((g) => g()) };
}

const post = (router: Router, peer: RequestPeer, body: unknown, key?: string, url = '/api/v2/admin/things') =>
  inject(router, { method: 'POST', url, peer, body, headers: key === undefined ? {} : { 'Idempotency-Key': key } });

describe('idempotency middleware (spec 4.11)', () => {
  test('covers mutating methods under the three prefixes only', () => {
    assert.ok(isIdempotentRoute('POST', '/api/v2/admin/hypervisor/checkpoints'));
    assert.ok(isIdempotentRoute('DELETE', '/api/v2/startup-profiles/:name'));
    assert.ok(isIdempotentRoute('PUT', '/api/v2/fleet'));
    assert.ok(!isIdempotentRoute('GET', '/api/v2/admin/operations/:id'));
    assert.ok(!isIdempotentRoute('POST', '/api/v2/activity/ingest'));
    assert.ok(!isIdempotentRoute('POST', '/api/v2/administrators'));
  });

  test('an identical replay: original status, headers and body bytes, plus Idempotency-Replayed: true', async () => {
    const s = server();
    const first = await post(s.router, alice, { vm: 'a', b: 1 }, 'k1');
    assert.equal(first.status, 202);
    assert.equal(first.headers['location'], '/api/v2/admin/operations/op-1');
    assert.equal(first.text, '{"id":"op-1","n":1}', 'the route serializer shaped the body');
    assert.equal(first.headers['idempotency-replayed'], undefined);
    const again = await post(s.router, alice, { b: 1, vm: 'a' }, 'k1');
    assert.equal(again.status, 202);
    assert.equal(again.text, first.text);
    assert.equal(again.headers['location'], first.headers['location']);
    assert.equal(again.headers['content-type'], first.headers['content-type']);
    assert.equal(again.headers['idempotency-replayed'], 'true');
    assert.equal(s.runs(), 1);
  });

  test('the key belongs to the operator: the same key from another operator is another binding', async () => {
    const s = server();
    await post(s.router, alice, {}, 'shared');
    const b = await post(s.router, bob, {}, 'shared');
    assert.equal(b.headers['idempotency-replayed'], undefined);
    assert.equal(b.text, '{"id":"op-2","n":2}');
  });

  test('same key, other body or other query: 409 idempotency.key_conflict', async () => {
    const s = server();
    await post(s.router, alice, { vm: 'a' }, 'k');
    const other = await post(s.router, alice, { vm: 'b' }, 'k');
    assert.equal(other.status, 409);
    assert.equal((other.json() as { error: { code: string } }).error.code, 'idempotency.key_conflict');
    const query = await post(s.router, alice, { vm: 'a' }, 'k', '/api/v2/admin/things?dry_run=1');
    assert.equal(query.status, 409);
    assert.equal(s.runs(), 1);
  });

  test('a duplicate while the original runs: 409 idempotency.in_progress, Retry-After: 1; then the replay', async () => {
    const s = server();
    const first = post(s.router, alice, { slow: true }, 'k');
    await new Promise((r) => setImmediate(r));
    const dup = await post(s.router, alice, { slow: true }, 'k');
    assert.equal(dup.status, 409);
    assert.equal(dup.headers['retry-after'], '1');
    assert.equal((dup.json() as { error: { code: string } }).error.code, 'idempotency.in_progress');
    s.release();
    assert.equal((await first).status, 202);
    assert.equal((await post(s.router, alice, { slow: true }, 'k')).headers['idempotency-replayed'], 'true');
  });

  test('a failed original releases the key; unkeyed, unresolved and uncovered requests run every time', async () => {
    const s = server();
    assert.equal((await post(s.router, alice, { fail: true }, 'k')).status, 500);
    assert.equal((await post(s.router, alice, { fail: true }, 'k')).status, 500, 'ran again, not replayed');
    await post(s.router, alice, {});
    await post(s.router, alice, {});
    await post(s.router, stranger, {}, 'k2');
    await post(s.router, stranger, {}, 'k2');
    await post(s.router, alice, {}, 'k3', '/api/v1/other');
    await post(s.router, alice, {}, 'k3', '/api/v1/other');
    assert.equal(s.runs(), 6);
  });

  test('a bad key is 400 request.invalid; a middleware installed after a covered route is a start-up error', async () => {
    const s = server();
    const bad = await post(s.router, alice, {}, 'has space');
    assert.equal(bad.status, 400);
    const r = new Router();
    r.add({ method: 'POST', path: '/api/v2/fleet/reconcile', handler: () => ({ status: 200, json: {} }) });
    const identity = new OperatorIdentity({ trustDomain: TD, localRole: 'admin', roles: () => ({ ok: true, roles: new Map() }) });
    assert.throws(
      () => r.use(idempotencyMiddleware({ idempotency: new Idempotency({ store: new MemoryBindingStore() }), identity })),
      /would miss POST \/api\/v2\/fleet\/reconcile/,
    );
  });
});
