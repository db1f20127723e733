/**
 * The activity routes as a collector and a dashboard use them (spec 4.12, part 5): ingest is
 * acknowledged after the commit and is idempotent; scope headers are required and must match each
 * event; bad batches are refused whole with a code and the offending field, and nothing of them —
 * above all no secret — reaches the store's files; reads page and filter; the admin role is
 * needed to ingest; the data survives a restart.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { activityComponent } from '../../src/activity/component.js';
import { SECRET_KEY_WORDS } from '../../src/activity/record.js';
import { adminListenerComponent, authComponent } from '../../src/auth/component.js';
import type { Config } from '../../src/config/schema.js';
import { eventsComponent } from '../../src/events/component.js';
import { ensureCa, issueOperatorCert, type CaMaterial, type IssuedCert } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { httpComponent } from '../../src/server/runtime-components.js';
import { activityEvent, kTestScope, scopeHeaders, TestCollector, uuidV7 } from '../support/activity-events.js';
import { mtlsRequest } from '../support/mtls-request.js';
import { loopbackConfig } from '../support/test-config.js';

interface AnswerJson {
  error?: { code: string; message: string };
  schema_version?: string;
  events?: Record<string, unknown>[];
  coverage?: Record<string, unknown>[];
  cursor_found?: boolean | null;
  accepted?: number;
  duplicates?: number;
  accepted_event_ids?: string[];
  durable_through_sequence?: number;
  sequence_jumps?: unknown[];
}

interface Answer {
  status: number;
  json: AnswerJson;
}

const components = () => [authComponent, eventsComponent(), activityComponent(), httpComponent, adminListenerComponent];

describe('activity routes', () => {
  let dir: string;
  let config: Config;
  let server: ServerHandle;
  let ca: CaMaterial;
  const certs: Record<string, IssuedCert> = {};
  const base = () => `http://127.0.0.1:${server.ports.http}`;

  async function call(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
    const res = await fetch(`${base()}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    return { status: res.status, json: (await res.json()) as AnswerJson };
  }
  const ingest = (events: unknown[], scope = kTestScope) => call('POST', '/api/v2/activity/ingest', scopeHeaders(scope), { events });
  const read = (query = '', scope = kTestScope) => call('GET', `/api/v2/activity/events${query}`, scopeHeaders(scope, false));

  async function adminCall(
    cert: IssuedCert,
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: unknown,
  ): Promise<Answer> {
    const r = await mtlsRequest(
      { port: server.ports.admin, ca: ca.caCertPem, cert: cert.certPem, key: cert.keyPem },
      method,
      path,
      body,
      headers,
    );
    return { status: r.status, json: JSON.parse(r.text) as AnswerJson };
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-activity-routes-'));
    const rolesPath = join(dir, 'roles.json');
    await writeFile(rolesPath, JSON.stringify({ alice: 'admin', bob: 'viewer' }));
    config = loopbackConfig(dir, { SVC_OPERATOR_ROLES: rolesPath });
    server = await startServer(config, pino({ level: 'silent' }), { components: components() });
    ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    certs['alice'] = await issueOperatorCert(ca, { name: 'alice' });
    certs['bob'] = await issueOperatorCert(ca, { name: 'bob' });
  });

  after(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  test('ingest answers after the commit with the ids; events and coverage read them back', async () => {
    const scope = { ...kTestScope, agent_id: 'agent-read' };
    const c = new TestCollector(scope);
    const batch = c.batch(3, (i) => ({ correlation: { session_id: `s-${i}` } }));
    const ack = await ingest(batch, scope);
    assert.equal(ack.status, 200, JSON.stringify(ack.json));
    assert.deepEqual(
      ack.json.accepted_event_ids,
      batch.map((e) => e['event_id']),
    );
    assert.equal(ack.json.durable_through_sequence, 3);
    const page = await read('?session_id=s-1', scope);
    assert.equal(page.status, 200);
    assert.equal(page.json.schema_version, 'activity.event/v1');
    assert.deepEqual(page.json.events, [batch[1]]);
    assert.equal(page.json.cursor_found, null);
    assert.equal(page.json.coverage?.[0]?.['event_count'], 3);
    const cov = await call('GET', '/api/v2/activity/coverage', scopeHeaders(scope, false));
    assert.equal(cov.status, 200);
    assert.deepEqual(
      (cov.json.coverage ?? []).map((x: Record<string, unknown>) => [x['collector_id'], x['event_count'], x['last_sequence']]),
      [['runtime', 3, 3]],
    );
  });

  test('the same batch twice, and three times at once, is stored once', async () => {
    const scope = { ...kTestScope, agent_id: 'agent-idem' };
    const batch = new TestCollector(scope).batch(50);
    const first = await ingest(batch, scope);
    const again = await ingest(batch, scope);
    assert.equal(again.status, 200);
    assert.equal(again.json.accepted, 0);
    assert.equal(again.json.duplicates, 50);
    const batch2 = new TestCollector(scope, 51).batch(50);
    const all = await Promise.all([ingest(batch2, scope), ingest(batch2, scope), ingest(batch2, scope)]);
    assert.deepEqual(
      all.map((a) => a.status),
      [200, 200, 200],
    );
    assert.equal(
      all.reduce((n, a) => n + (a.json.accepted ?? 0), 0),
      50,
    );
    const page = await read('?limit=5000', scope);
    assert.equal(page.json.events?.length, 100);
    assert.equal(first.json.accepted, 50);
  });

  test('each scope header is required, on ingest and on reads, and named when missing', async () => {
    const batch = [activityEvent(kTestScope, 1)];
    for (const h of ['x-svc-tenant-id', 'x-svc-host-id', 'x-svc-instance-id', 'x-svc-agent-id', 'x-svc-collector-id']) {
      const headers = scopeHeaders(kTestScope);
      delete headers[h];
      const r = await call('POST', '/api/v2/activity/ingest', headers, { events: batch });
      assert.equal(r.status, 400, h);
      assert.equal(r.json.error?.code, 'activity.scope_header_missing');
      assert.match(r.json.error?.message ?? '', new RegExp(h.replace('x-svc-', ''), 'i'));
      if (h !== 'x-svc-collector-id') {
        const g = await call(
          'GET',
          '/api/v2/activity/events',
          Object.fromEntries(Object.entries(scopeHeaders(kTestScope, false)).filter(([k]) => k !== h)),
        );
        assert.equal(g.status, 400, `GET without ${h}`);
        assert.equal(g.json.error?.code, 'activity.scope_header_missing');
      }
    }
    const star = await call('POST', '/api/v2/activity/ingest', { ...scopeHeaders(kTestScope), 'x-svc-agent-id': '*' }, { events: batch });
    assert.equal(star.json.error?.code, 'activity.scope_header_missing', 'no wildcard on ingest');
  });

  test('a bad event refuses the whole batch with its code, index and field; nothing of it is stored', async () => {
    const scope = { ...kTestScope, agent_id: 'agent-bad' };
    const c = new TestCollector(scope);
    const good = c.batch(2);
    const cases: [Record<string, unknown>, string, string][] = [
      [
        { ...activityEvent(scope, 3), correlation: { ...kTestScope, collector_id: undefined } },
        'activity.scope_mismatch',
        'correlation.agent_id',
      ],
      [
        { ...activityEvent(scope, 3), payload: { tool: { headers: { Authorization: 'x' } } } },
        'activity.secret_field',
        'payload.tool.headers.Authorization',
      ],
      [{ ...activityEvent(scope, 3), payload: { stdin: 'ls' } }, 'activity.restricted_content', 'payload.stdin'],
      [{ ...activityEvent(scope, 3), sensitivity: 'secret-prohibited' }, 'activity.secret_prohibited', 'sensitivity'],
      [{ ...activityEvent(scope, 3), plane: 'kernel' }, 'activity.event_invalid', 'plane'],
    ];
    for (const [bad, code, field] of cases) {
      const r = await ingest([...good, bad], scope);
      assert.equal(r.status, 400, code);
      assert.equal(r.json.error?.code, code);
      // The envelope is the spec's {code, message}: the message names the event and the field.
      assert.ok(r.json.error?.message.startsWith(`events[2] (${String(bad['event_id'])}): ${field}: `), r.json.error?.message);
    }
    assert.deepEqual((await read('', scope)).json.events, [], 'nothing of a refused batch is stored');
    const malformed = await call('POST', '/api/v2/activity/ingest', scopeHeaders(scope), '{"events": [');
    assert.equal(malformed.status, 400);
    assert.equal(malformed.json.error?.code, 'request.malformed_json');
  });

  test('no secret reaches the store: every secret key, refused, leaves no trace in the database files', async () => {
    const scope = { ...kTestScope, agent_id: 'agent-secret' };
    const marker = `sekrit-${uuidV7()}`;
    for (const words of SECRET_KEY_WORDS) {
      const r = await ingest([activityEvent(scope, 1, { payload: { deep: [{ inner: { [words.join('_')]: marker } }] } })], scope);
      assert.equal(r.status, 400, words.join('_'));
      assert.equal(r.json.error?.code, 'activity.secret_field');
      assert.ok(!JSON.stringify(r.json).includes(marker), 'the error does not echo the value');
    }
    const pem = `-----BEGIN PRIVATE KEY-----\n${marker}\n-----END PRIVATE KEY-----`;
    assert.equal((await ingest([activityEvent(scope, 1, { payload: { note: pem } })], scope)).json.error?.code, 'activity.secret_field');
    await ingest(new TestCollector(scope).batch(5), scope);
    const files = readdirSync(join(dir, 'activity')).map((f) => readFileSync(join(dir, 'activity', f)).toString('latin1'));
    assert.ok(files.length > 0);
    for (const f of files) assert.ok(!f.includes(marker), 'the secret is in no database file');
  });

  test('batch bounds: 1001 events is 413 activity.batch_too_large; a body over 4 MiB is 413', async () => {
    const c = new TestCollector({ ...kTestScope, agent_id: 'agent-big' });
    const r = await ingest(c.batch(1001), c.scope);
    assert.equal(r.status, 413);
    assert.equal(r.json.error?.code, 'activity.batch_too_large');
    const huge = await call('POST', '/api/v2/activity/ingest', scopeHeaders(c.scope), `{"events": [${' '.repeat(4 * 1024 * 1024 + 10)}]}`);
    assert.equal(huge.status, 413);
    assert.equal(huge.json.error?.code, 'request.body_too_large');
  });

  test('reads: limit bounds, unknown parameters refused, an unknown cursor says so, "*" reads across agents', async () => {
    assert.equal((await read('?limit=5001')).status, 400);
    assert.equal((await read('?limit=0')).status, 400);
    const typo = await read('?sesion_id=x');
    assert.equal(typo.status, 400);
    assert.match(typo.json.error?.message ?? '', /sesion_id/);
    assert.equal((await read('?since=yesterday')).status, 400);
    const unknown = await read(`?cursor=${uuidV7()}`, { ...kTestScope, agent_id: 'agent-read' });
    assert.equal(unknown.status, 200);
    assert.equal(unknown.json.cursor_found, false);
    assert.equal(unknown.json.events?.length, 3);
    const fleet = await call('GET', '/api/v2/activity/coverage', { ...scopeHeaders(kTestScope, false), 'x-svc-agent-id': '*' });
    const agents = new Set((fleet.json.coverage ?? []).map((x: Record<string, unknown>) => x['agent_id']));
    assert.ok(agents.has('agent-read') && agents.has('agent-idem'), [...agents].join());
  });

  test('roles: an admin operator may ingest; a viewer may read but not ingest', async () => {
    const scope = { ...kTestScope, agent_id: 'agent-roles' };
    const batch = new TestCollector(scope).batch(2);
    const viewer = await adminCall(certs['bob']!, 'POST', '/api/v2/activity/ingest', scopeHeaders(scope), { events: batch });
    assert.equal(viewer.status, 403);
    assert.equal(viewer.json.error?.code, 'auth.permission_denied');
    assert.match(viewer.json.error?.message ?? '', /activity\.ingest/);
    const admin = await adminCall(certs['alice']!, 'POST', '/api/v2/activity/ingest', scopeHeaders(scope), { events: batch });
    assert.equal(admin.status, 200, JSON.stringify(admin.json));
    const viewerRead = await adminCall(certs['bob']!, 'GET', '/api/v2/activity/events', scopeHeaders(scope, false));
    assert.equal(viewerRead.status, 200);
    assert.equal(viewerRead.json.events?.length, 2);
  });

  test('acknowledged events survive a restart of sandboxd', async () => {
    const scope = { ...kTestScope, agent_id: 'agent-restart' };
    const c = new TestCollector(scope);
    const batch = c.batch(10);
    assert.equal((await ingest(batch, scope)).status, 200);
    await server.stop();
    server = await startServer(config, pino({ level: 'silent' }), { components: components() });
    const page = await read('', scope);
    assert.deepEqual(page.json.events, batch);
    const next = await ingest(c.batch(1), scope);
    assert.deepEqual(next.json.sequence_jumps, [], 'the collector continues where it was');
  });
});
