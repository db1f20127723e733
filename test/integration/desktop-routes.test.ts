/**
 * The seven desktop routes (spec 4.15) over the real desktop listener: capability honesty,
 * enrollment revisions, idempotent create under 20 concurrent identical requests, conflicting
 * payloads, one-use grants (redeemed through the backend port's redeem step), reconnect after the
 * absolute expiry, close with a stale generation, sign-out cleanup, and durability across a
 * restart. Answers are validated against the JSON Schemas in src/desktop/.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { repoRoot } from '../support/paths.js';
import { DesktopBed, type Reply } from './desktop-harness.js';

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv, ['date-time']);
const schema = (name: string): ((v: unknown) => boolean) & { errors?: unknown } => {
  const s = JSON.parse(readFileSync(join(repoRoot, 'src', 'desktop', `${name}.schema.json`), 'utf8')) as { $id: string };
  ajv.addSchema(s);
  return ajv.getSchema(s.$id)!;
};
const isCapability = schema('desktop-capability-v1');
const isResource = schema('desktop-resource-v1');
const isGrant = schema('desktop-grant-v1');

function valid(check: ReturnType<typeof schema>, r: Reply): Record<string, unknown> {
  assert.ok(check(r.json), `${JSON.stringify(check.errors)} in ${r.text}`);
  return r.json;
}

const HOUR_MS = 3600_000;
const bed = new DesktopBed();

describe('desktop routes', () => {
  let token: string;
  before(async () => {
    await bed.start();
    token = await bed.token();
  });
  after(() => bed.stop());

  const create = (instance: string, key: string, t = token): Promise<Reply> =>
    bed.as(t, 'POST', `/api/v2/instances/${instance}/desktop-sessions`, { idempotency_key: key });

  test('capability: supported false, readiness unknown, with the reasons (no backend on this image)', async () => {
    const r = await bed.as(token, 'GET', '/api/v2/instances/vm-cap/desktop-capability');
    assert.equal(r.status, 200, r.text);
    const c = valid(isCapability, r);
    assert.equal(c['supported'], false);
    assert.equal(c['readiness'], 'unknown');
    assert.deepEqual(c['reason_codes'], ['backend_unavailable', 'not_enrolled']);
    assert.equal(c['incarnation'], null);
    assert.equal((await bed.enroll('vm-cap', token)).status, 200);
    const after = valid(isCapability, await bed.as(token, 'GET', '/api/v2/instances/vm-cap/desktop-capability'));
    assert.deepEqual(after['reason_codes'], ['backend_unavailable']);
    assert.equal(after['incarnation'], 'inc-1');
    assert.equal(after['supported'], false);
  });

  test('enrollment: unknown fields rejected, revisions increment, a mismatched expected_revision is 409 enrollment_conflict', async () => {
    const bad = await bed.enroll('vm-enr', token, { extra: 1 });
    assert.equal(bad.status, 400);
    assert.equal(bad.json['code'], 'invalid_enrollment');
    assert.equal((await bed.enroll('vm-enr', token, { ssh_address: 'no-port' })).json['code'], 'invalid_enrollment');
    assert.equal((await bed.enroll('vm-enr', token, { ssh_host_key: 'not a key' })).json['code'], 'invalid_enrollment');
    const first = await bed.enroll('vm-enr', token);
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(first.json, { instance_id: 'vm-enr', incarnation: 'inc-1', revision: 1 });
    // the same enrollment again is a retry: no new revision
    assert.equal((await bed.enroll('vm-enr', token)).json['revision'], 1);
    const second = await bed.enroll('vm-enr', token, { incarnation: 'inc-2', expected_revision: 1 });
    assert.deepEqual(second.json, { instance_id: 'vm-enr', incarnation: 'inc-2', revision: 2 });
    const stale = await bed.enroll('vm-enr', token, { incarnation: 'inc-3', expected_revision: 1 });
    assert.equal(stale.status, 409);
    assert.equal(stale.json['code'], 'enrollment_conflict');
    assert.equal(stale.headers['content-type'], 'application/problem+json');
  });

  test('create without an enrollment is refused: 409 resource_conflict', async () => {
    const r = await create('vm-none', 'k-none');
    assert.equal(r.status, 409, r.text);
    assert.equal(r.json['code'], 'resource_conflict');
  });

  test('20 concurrent identical creates give one resource; a conflicting payload fails', async () => {
    assert.equal((await bed.enroll('vm-idem', token)).status, 200);
    assert.equal((await bed.enroll('vm-idem-2', token)).status, 200);
    const replies = await Promise.all(Array.from({ length: 20 }, () => create('vm-idem', 'same-key')));
    for (const r of replies) assert.equal(r.status, 200, r.text);
    const ids = new Set(replies.map((r) => r.json['desktop_id']));
    assert.equal(ids.size, 1);
    const first = valid(isResource, replies[0]!);
    assert.equal(first['desired'], 'active');
    assert.equal(first['observed'], 'unknown');
    assert.equal(first['cleanup'], 'none');
    assert.equal(first['fenced'], false);
    assert.equal(first['generation'], 1);
    assert.equal(first['incarnation'], 'inc-1');
    const epochMs = Date.parse(first['authorization_epoch'] as string);
    assert.equal(Date.parse(first['absolute_expires_at'] as string) - epochMs, 8 * HOUR_MS);
    for (const r of replies) assert.deepEqual(r.json, first);

    // a retry an hour later: the same resource with its original epoch
    bed.nowMs += HOUR_MS;
    const t = await bed.token();
    const retry = await create('vm-idem', 'same-key', t);
    assert.deepEqual(retry.json, first);

    // the same key for another instance: conflict
    const other = await create('vm-idem-2', 'same-key', t);
    assert.equal(other.status, 409, other.text);
    assert.equal(other.json['code'], 'resource_conflict');
    // the instance re-enrolled (new incarnation, new revision): the key's binding no longer matches
    assert.equal((await bed.enroll('vm-idem', t, { incarnation: 'inc-9', expected_revision: 1 })).status, 200);
    const rebound = await create('vm-idem', 'same-key', t);
    assert.equal(rebound.status, 409, rebound.text);
    assert.equal(rebound.json['code'], 'resource_conflict');
    // the same key of another subject is another binding
    const bob = await create('vm-idem', 'same-key', await bed.token({ sub: 'bob' }));
    assert.equal(bob.status, 200, bob.text);
    assert.notEqual(bob.json['desktop_id'], first['desktop_id']);
    // unknown fields are rejected
    const extra = await bed.as(t, 'POST', '/api/v2/instances/vm-idem/desktop-sessions', { idempotency_key: 'x', instance_id: 'y' });
    assert.equal(extra.status, 400);
    assert.equal(extra.json['code'], 'invalid_resource_request');
  });

  test("a grant is usable once, through the backend port; the action is the route's", async () => {
    token = await bed.token();
    assert.equal((await bed.enroll('vm-grant', token)).status, 200);
    const id = (await create('vm-grant', 'g-1')).json['desktop_id'] as string;
    const attach = await bed.call(`/api/v2/desktop-sessions/${id}/attach`, { method: 'POST', authorization: [`Bearer ${token}`] });
    assert.equal(attach.status, 201, attach.text);
    assert.equal(attach.headers['cache-control'], 'no-store');
    const g = valid(isGrant, attach);
    const grant = g['grant'] as string;
    const redeemed = bed.service.redeem(grant);
    assert.ok(redeemed !== null);
    assert.equal(redeemed.desktopId, id);
    assert.equal(redeemed.action, 'attach');
    assert.equal(redeemed.sshAddress, '10.0.0.5:22');
    assert.equal(bed.service.redeem(grant), null, 'a second redeem of the same grant');
    assert.equal(bed.service.redeem(`${grant}x`), null);

    const reconnect = await bed.as(token, 'POST', `/api/v2/desktop-sessions/${id}/reconnect`);
    assert.equal(reconnect.status, 201, reconnect.text);
    const again = valid(isGrant, reconnect)['grant'] as string;
    assert.notEqual(again, grant);
    assert.equal(bed.service.redeem(again)?.action, 'reconnect');
    assert.equal(bed.service.redeem(again), null);

    // a grant not redeemed within its lifetime is void
    const late = (await bed.as(token, 'POST', `/api/v2/desktop-sessions/${id}/attach`)).json['grant'] as string;
    bed.nowMs += 61_000;
    assert.equal(bed.service.redeem(late), null);
    // the resource itself did not change
    const r = valid(isResource, await bed.as(await bed.token(), 'GET', `/api/v2/desktop-sessions/${id}`));
    assert.equal(r['generation'], 1);
  });

  test('reconnect never extends the absolute expiry and is refused after it', async () => {
    assert.equal((await bed.enroll('vm-exp', await bed.token())).status, 200);
    const created = valid(isResource, await create('vm-exp', 'e-1', await bed.token()));
    const id = created['desktop_id'] as string;
    const expiresMs = Date.parse(created['absolute_expires_at'] as string);
    // ten seconds before the end: a grant lives no longer than the resource
    bed.nowMs = expiresMs - 10_000;
    const near = await bed.as(await bed.token(), 'POST', `/api/v2/desktop-sessions/${id}/reconnect`);
    assert.equal(near.status, 201, near.text);
    assert.ok(Date.parse(valid(isGrant, near)['expires_at'] as string) <= expiresMs);
    const nearGrant = near.json['grant'] as string;
    const after = valid(isResource, await bed.as(await bed.token(), 'GET', `/api/v2/desktop-sessions/${id}`));
    assert.equal(after['absolute_expires_at'], created['absolute_expires_at']);
    // past the absolute expiry: refused, and a grant issued before it no longer redeems
    bed.nowMs = expiresMs + 1000;
    const t = await bed.token();
    for (const action of ['reconnect', 'attach']) {
      const r = await bed.as(t, 'POST', `/api/v2/desktop-sessions/${id}/${action}`);
      assert.equal(r.status, 403, r.text);
      assert.equal(r.json['code'], 'access_denied');
      assert.equal(r.headers['content-type'], 'application/problem+json');
    }
    assert.equal(bed.service.redeem(nearGrant), null);
    token = t;
  });

  test('close: unknown fields rejected, a stale generation refused, sign_out false fences (200), a retried create does not revive it', async () => {
    token = await bed.token();
    assert.equal((await bed.enroll('vm-close', token)).status, 200);
    const id = (await create('vm-close', 'c-1')).json['desktop_id'] as string;
    const grant = (await bed.as(token, 'POST', `/api/v2/desktop-sessions/${id}/attach`)).json['grant'] as string;
    const path = `/api/v2/desktop-sessions/${id}/close`;
    const extra = await bed.as(token, 'POST', path, { expected_generation: 1, sign_out: false, force: true });
    assert.equal(extra.status, 400);
    assert.equal(extra.json['code'], 'invalid_resource_request');
    const missing = await bed.as(token, 'POST', path, { expected_generation: 1 });
    assert.equal(missing.status, 400);
    const stale = await bed.as(token, 'POST', path, { expected_generation: 2, sign_out: false });
    assert.equal(stale.status, 409, stale.text);
    assert.equal(stale.json['code'], 'resource_conflict');

    const closed = await bed.as(token, 'POST', path, { expected_generation: 1, sign_out: false });
    assert.equal(closed.status, 200, closed.text);
    const c = valid(isResource, closed);
    assert.equal(c['desired'], 'closed');
    assert.equal(c['fenced'], true);
    assert.equal(c['cleanup'], 'none');
    assert.equal(c['generation'], 2);
    // the generation it was closed with is now stale
    assert.equal((await bed.as(token, 'POST', path, { expected_generation: 1, sign_out: false })).status, 409);
    // fenced: a grant issued before the close no longer redeems, and no new grant is issued
    assert.equal(bed.service.redeem(grant), null);
    const attach = await bed.as(token, 'POST', `/api/v2/desktop-sessions/${id}/attach`);
    assert.equal(attach.status, 409, attach.text);
    assert.equal(attach.json['code'], 'resource_conflict');
    // a retried create returns the closed resource: never recreated
    const retried = await create('vm-close', 'c-1');
    assert.equal(retried.status, 200);
    assert.deepEqual(retried.json, c);
  });

  test('close with sign_out true fences and leaves cleanup pending: 202', async () => {
    assert.equal((await bed.enroll('vm-signout', token)).status, 200);
    const id = (await create('vm-signout', 's-1')).json['desktop_id'] as string;
    const r = await bed.as(token, 'POST', `/api/v2/desktop-sessions/${id}/close`, { expected_generation: 1, sign_out: true });
    assert.equal(r.status, 202, r.text);
    const c = valid(isResource, r);
    assert.equal(c['fenced'], true);
    assert.equal(c['cleanup'], 'pending');
    const get = await bed.as(token, 'GET', `/api/v2/desktop-sessions/${id}`);
    assert.equal(get.json['cleanup'], 'pending');
  });

  test('the lifecycle is in the event store, without grants or tokens', () => {
    const events = bed.server.events.query({ eventType: 'desktop.*', limit: 5000 }).events;
    const types = new Set(events.map((e) => e.event_type));
    for (const t of ['desktop.enrolled', 'desktop.created', 'desktop.grant_issued', 'desktop.grant_redeemed', 'desktop.closed']) {
      assert.ok(types.has(t), `no ${t} event`);
    }
    const closed = events.find((e) => e.event_type === 'desktop.closed' && e.vm_name === 'vm-signout');
    assert.equal(closed?.details['cleanup'], 'pending');
    assert.doesNotMatch(JSON.stringify(events), /dgr_|eyJ/);
  });

  test('resources, bindings and enrollments survive a restart', async () => {
    const id = (await create('vm-grant', 'g-1')).json['desktop_id'] as string;
    await bed.restart();
    const t = await bed.token();
    const again = await create('vm-grant', 'g-1', t);
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json['desktop_id'], id);
    assert.equal((await bed.enroll('vm-enr', t, { incarnation: 'inc-4', expected_revision: 1 })).json['code'], 'enrollment_conflict');
  });

  test('no token or grant appears in the log', () => {
    const log = bed.logLines.join('\n');
    assert.ok(!log.includes(token.split('.')[2]!), 'a token signature is logged');
    assert.doesNotMatch(log, /Bearer|dgr_/);
  });
});
