/**
 * The JSON Schemas of scoped storage's records (src/storage/storage-listing-v1.schema.json,
 * storage-review-v1.schema.json) agree with what the routes send: every record of a run through
 * all review outcomes, and listings with every entry kind, validate; records a schema must refuse
 * are refused.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { OperatorIdentity } from '../../../src/auth/operator-identity.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { InboxQuota } from '../../../src/storage/inbox-quota.js';
import { ReviewStore } from '../../../src/storage/review-store.js';
import { registerScopedStorageRoutes } from '../../../src/storage/scoped-routes.js';
import { ScopedStorage } from '../../../src/storage/scoped-storage.js';
import { Storage } from '../../../src/storage/storage.js';
import { repoRoot } from '../../support/paths.js';

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv, ['date-time']);
const load = (file: string) => {
  const schema = JSON.parse(readFileSync(join(repoRoot, 'src', 'storage', file), 'utf8')) as { $id: string };
  ajv.addSchema(schema);
  const v = ajv.getSchema(schema.$id);
  assert.ok(v !== undefined);
  return v;
};
const listingOk = load('storage-listing-v1.schema.json');
const reviewOk = load('storage-review-v1.schema.json');

describe('storage record schemas', () => {
  const base = mkdtempSync(join(tmpdir(), 'sbx-schemas-'));
  const root = join(base, 'storage');
  const task = `task-${randomUUID()}`;
  mkdirSync(join(root, 'outbox', task, 'dir'), { recursive: true });
  writeFileSync(join(root, 'outbox', task, 'f.txt'), 'x');
  symlinkSync('/etc', join(root, 'outbox', task, 'link'));
  const store = new ReviewStore(join(base, 'reviews'));
  const storage = new Storage({ rootDir: root });
  const quota = new InboxQuota({ inboxesDir: storage.inboxesDir(), quotaBytes: 4096 });
  const router = new Router();
  registerScopedStorageRoutes(router, {
    scoped: new ScopedStorage({ storage, reviews: store, quota }),
    identity: new OperatorIdentity({ trustDomain: 't', localRole: 'admin', roles: () => ({ ok: true, roles: new Map() }) }),
  });
  after(() => {
    store.close();
    rmSync(base, { recursive: true, force: true });
  });
  const call = async (method: string, url: string, body?: string) => inject(router, { method, url, ...(body !== undefined && { body }) });

  test('listings validate', async () => {
    const page = (await call('GET', `/api/v2/storage/outbox/${task}/list`)).json();
    assert.ok(listingOk(page), JSON.stringify(listingOk.errors));
    const kinds = (page as { entries: Array<{ kind: string }> }).entries.map((e) => e.kind).sort();
    assert.deepEqual(kinds, ['dir', 'file', 'symlink']);
    const paged = (await call('GET', `/api/v2/storage/outbox/${task}/list?limit=1`)).json();
    assert.ok(listingOk(paged), JSON.stringify(listingOk.errors));
    assert.ok(!listingOk({ ...(page as object), entries: [{ name: 'a', kind: 'file', size_bytes: 1, modified: 'x', content: 'no' }] }));
  });

  test('reviews in every state validate', async () => {
    const records: unknown[] = [];
    const put = async (url: string, body: string) => {
      const r = (await call('PUT', url, body)).json() as { review: { id: string } };
      records.push(r.review);
      return r.review.id;
    };
    const applied = await put(`/api/v2/storage/outbox/${task}/objects/new.txt`, 'new');
    records.push(((await call('POST', `/api/v2/storage/reviews/${applied}/approve`)).json() as { review: unknown }).review);
    const rejected = await put(`/api/v2/storage/outbox/${task}/objects/other.txt`, 'other');
    records.push(((await call('POST', `/api/v2/storage/reviews/${rejected}/reject`)).json() as { review: unknown }).review);
    const failing = await put('/api/v2/storage/inbox/agent-s/objects/a.bin', 'a'.repeat(3000));
    await put('/api/v2/storage/inbox/agent-s/objects/b.bin', 'b'.repeat(3000));
    const first = (await call('POST', `/api/v2/storage/reviews/${failing}/approve`)).json() as { review: unknown };
    records.push(first.review);
    const del = (await call('DELETE', `/api/v2/storage/outbox/${task}/objects/f.txt?confirm=delete`)).json() as { review: { id: string } };
    records.push(del.review);
    records.push(...((await call('GET', '/api/v2/storage/reviews')).json() as { reviews: unknown[] }).reviews);
    const states = new Set(records.map((r) => (r as { state: string }).state));
    for (const s of ['pending', 'applied', 'rejected']) assert.ok(states.has(s), s);
    for (const r of records) assert.ok(reviewOk(r), `${JSON.stringify(r)}: ${JSON.stringify(reviewOk.errors)}`);
    const last = (await call('GET', '/api/v2/storage/reviews?state=pending')).json() as { reviews: Array<{ id: string }> };
    const b = last.reviews.find((r) => r.id !== del.review.id);
    assert.ok(b !== undefined);
    await call('POST', `/api/v2/storage/reviews/${b.id}/approve`);
    const failed = ((await call('GET', `/api/v2/storage/reviews/${b.id}`)).json() as { review: { state: string } }).review;
    assert.equal(failed.state, 'failed');
    assert.ok(reviewOk(failed), JSON.stringify(reviewOk.errors));
    assert.ok(!reviewOk({ ...failed, state: 'maybe' }));
  });
});
