/**
 * Who may write and review in scoped storage (operator identities on the admin listener, as the
 * one operator-identity function resolves them), the four-eyes rule, reviews surviving a
 * restart of the store, and an Idempotency-Key replay of a write request.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { OperatorIdentity } from '../../../src/auth/operator-identity.js';
import type { Role } from '../../../src/auth/permissions.js';
import { inject, type InjectResponse } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import type { RequestPeer } from '../../../src/http/types.js';
import { MemoryBindingStore } from '../../../src/idempotency/binding-store.js';
import { Idempotency } from '../../../src/idempotency/idempotency.js';
import { idempotencyMiddleware } from '../../../src/idempotency/middleware.js';
import { InboxQuota } from '../../../src/storage/inbox-quota.js';
import { ReviewStore } from '../../../src/storage/review-store.js';
import { registerScopedStorageRoutes } from '../../../src/storage/scoped-routes.js';
import { ScopedStorage } from '../../../src/storage/scoped-storage.js';
import { Storage } from '../../../src/storage/storage.js';

const TD = 'sbx.test';
const peer = (name: string): RequestPeer => ({ transport: 'mtls', spiffeId: `spiffe://${TD}/operator/${name}`, fingerprint256: 'AA:BB' });

describe('scoped storage: permissions and review', () => {
  let base: string;
  let root: string;
  let reviewsDir: string;
  let store: ReviewStore;
  let router: Router;
  const taskId = `task-${randomUUID()}`;
  const roles = new Map<string, Role>([
    ['viv', 'viewer'],
    ['olga', 'operator'],
    ['ada', 'admin'],
    ['ben', 'admin'],
  ]);

  const build = (): Router => {
    const r = new Router();
    const identity = new OperatorIdentity({ trustDomain: TD, localRole: 'admin', roles: () => ({ ok: true, roles }) });
    r.use(idempotencyMiddleware({ idempotency: new Idempotency({ store: new MemoryBindingStore() }), identity }));
    const storage = new Storage({ rootDir: root });
    const quota = new InboxQuota({ inboxesDir: storage.inboxesDir() });
    registerScopedStorageRoutes(r, { scoped: new ScopedStorage({ storage, reviews: store, quota }), identity });
    return r;
  };

  before(() => {
    base = mkdtempSync(join(tmpdir(), 'sbx-review-'));
    root = join(base, 'storage');
    reviewsDir = join(base, 'storage-reviews');
    mkdirSync(join(root, 'outbox', taskId), { recursive: true });
    store = new ReviewStore(reviewsDir);
    router = build();
  });
  after(() => {
    store.close();
    rmSync(base, { recursive: true, force: true });
  });

  const O = `/api/v2/storage/outbox/${taskId}`;
  const as = (
    who: string | null,
    method: string,
    url: string,
    extra: { body?: string; headers?: Record<string, string> } = {},
  ): Promise<InjectResponse> => inject(router, { method, url, ...(who === null ? {} : { peer: peer(who) }), ...extra });
  const code = (r: InjectResponse): string | undefined => (r.json() as { error?: { code: string } }).error?.code;
  const reviewOf = (r: InjectResponse): { id: string; state: string; requested_by: string; decided_by: string | null } =>
    (r.json() as { review: { id: string; state: string; requested_by: string; decided_by: string | null } }).review;

  test('a viewer reads but cannot request writes; an operator requests but cannot approve', async () => {
    assert.equal((await as('viv', 'GET', `${O}/list`)).status, 200);
    const put = await as('viv', 'PUT', `${O}/objects/a.txt`, { body: 'x' });
    assert.equal(put.status, 403);
    assert.equal(code(put), 'auth.permission_denied');
    const req = await as('olga', 'PUT', `${O}/objects/a.txt`, { body: 'from olga' });
    assert.equal(req.status, 202);
    const id = reviewOf(req).id;
    assert.equal(reviewOf(req).requested_by, 'olga');
    assert.equal(code(await as('olga', 'POST', `/api/v2/storage/reviews/${id}/approve`)), 'auth.permission_denied');
    const ok = await as('ada', 'POST', `/api/v2/storage/reviews/${id}/approve`);
    assert.equal(ok.status, 200);
    assert.equal(reviewOf(ok).state, 'applied');
    assert.equal(reviewOf(ok).decided_by, 'ada');
    assert.equal(readFileSync(join(root, 'outbox', taskId, 'a.txt'), 'utf8'), 'from olga');
  });

  test('an operator never approves their own write: a second identity must', async () => {
    const req = await as('ada', 'PUT', `${O}/objects/b.txt`, { body: 'from ada' });
    const id = reviewOf(req).id;
    const self = await as('ada', 'POST', `/api/v2/storage/reviews/${id}/approve`);
    assert.equal(self.status, 403);
    assert.equal(code(self), 'storage.review_self');
    assert.equal(reviewOf(await as('ben', 'GET', `/api/v2/storage/reviews/${id}`)).state, 'pending');
    assert.equal(reviewOf(await as('ben', 'POST', `/api/v2/storage/reviews/${id}/approve`)).state, 'applied');
  });

  test('pending reviews survive a restart of the store and are approved afterwards', async () => {
    const req = await as('olga', 'PUT', `${O}/objects/c.txt`, { body: 'durable' });
    const id = reviewOf(req).id;
    store.close();
    store = new ReviewStore(reviewsDir);
    router = build();
    const pending = (await as('viv', 'GET', '/api/v2/storage/reviews?state=pending')).json() as { reviews: Array<{ id: string }> };
    assert.ok(pending.reviews.some((r) => r.id === id));
    assert.equal(reviewOf(await as('ben', 'POST', `/api/v2/storage/reviews/${id}/approve`)).state, 'applied');
    assert.equal(readFileSync(join(root, 'outbox', taskId, 'c.txt'), 'utf8'), 'durable');
  });

  test('an Idempotency-Key replay of a write request returns the same review, not a second one', async () => {
    const headers = { 'idempotency-key': `k-${randomUUID()}` };
    const first = await as('olga', 'PUT', `${O}/objects/d.txt`, { body: 'once', headers });
    const again = await as('olga', 'PUT', `${O}/objects/d.txt`, { body: 'once', headers });
    assert.equal(first.status, 202);
    assert.equal(again.status, 202);
    assert.equal(again.headers['idempotency-replayed'], 'true');
    assert.equal(reviewOf(again).id, reviewOf(first).id);
    assert.equal(store.list('pending', 500).filter((r) => r.path === 'd.txt').length, 1);
    const other = await as('olga', 'PUT', `${O}/objects/d.txt`, { body: 'different', headers });
    assert.equal(code(other), 'idempotency.key_conflict');
  });

  test('the trusted local listener is one principal: it may approve its own request', async () => {
    const req = await as(null, 'PUT', `${O}/objects/e.txt`, { body: 'local' });
    assert.equal(reviewOf(req).requested_by, 'local');
    assert.equal(reviewOf(await as(null, 'POST', `/api/v2/storage/reviews/${reviewOf(req).id}/approve`)).state, 'applied');
  });
});
