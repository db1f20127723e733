/**
 * Credentials, leases and the credential proxy over the real HTTP listener, against an upstream
 * echo server on 127.0.0.1 that counts what reaches it (issue 17 items 3-5).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { OperatorIdentity } from '../../src/auth/operator-identity.js';
import type { Component } from '../../src/component/component.js';
import { inject } from '../../src/http/inject.js';
import { EchoUpstream, startHarness, type Harness } from './credentials-harness.js';

const SECRET = `sk-test-${randomBytes(16).toString('hex')}`;
const today = (): string => new Date().toISOString().slice(0, 10);

void describe('credential proxy', () => {
  let h: Harness;
  const up = new EchoUpstream();
  let upstream = '';
  const scope = { agent_id: 'agent-1', instance_id: 'inst-1', session_id: 'sess-1' };
  const policy = () => ({
    hosts: ['127.0.0.1'],
    path_prefixes: ['/v1'],
    methods: ['GET', 'POST'],
    header_allowlist: ['content-type', 'x-trace'],
  });

  async function lease(extra: Record<string, unknown> = {}): Promise<string> {
    const r = await h.call('POST', '/api/v2/credentials/leases', {
      credential: 'echo-token',
      ...scope,
      ttl_seconds: 600,
      proxy_policy: policy(),
      ...extra,
    });
    assert.equal(r.status, 201, r.text);
    return r.json['id'] as string;
  }
  const proxy = (body: Record<string, unknown>) =>
    h.call('POST', '/api/v2/credential-proxy/http', {
      ...scope,
      method: 'GET',
      url: `${upstream}/v1/echo`,
      headers: {},
      body: null,
      ...body,
    });

  before(async () => {
    await up.start();
    upstream = `http://127.0.0.1:${up.port}`;
    h = await startHarness();
    const r = await h.call('POST', '/api/v2/credentials', {
      name: 'echo-token',
      value: SECRET,
      injection: { header_name: 'Authorization', value_prefix: 'Bearer ' },
    });
    assert.equal(r.status, 201, r.text);
  });
  after(async () => {
    await h.stop();
    await up.stop();
  });

  void test('the credential reaches upstream in its header; the echo comes back redacted in headers and body', async () => {
    const id = await lease();
    const r = await proxy({ lease_id: id, method: 'POST', headers: { 'Content-Type': 'text/plain', 'x-trace': 't1' }, body: 'hello' });
    assert.equal(r.status, 200, r.text);
    const seen = up.seen.at(-1);
    assert.equal(seen?.headers.authorization, `Bearer ${SECRET}`);
    assert.equal(seen?.headers['x-trace'], 't1');
    assert.equal(seen?.body, 'hello');
    assert.equal(r.json['status'], 200);
    const headers = r.json['headers'] as Record<string, string>;
    assert.equal(headers['x-echo-authorization'], 'Bearer [REDACTED]');
    assert.equal(headers['x-echo-token-b64'], '[REDACTED]');
    const body = JSON.parse(r.json['body'] as string) as Record<string, string>;
    assert.equal(body['authorization'], 'Bearer [REDACTED]');
    assert.equal(body['token_b64'], '[REDACTED]');
    assert.ok(!r.text.includes(SECRET) && !r.text.includes(Buffer.from(SECRET).toString('base64')));
  });

  void test('every denial is refused with its code before anything reaches upstream', async () => {
    const good = await lease();
    const revoked = await lease();
    assert.equal((await h.call('DELETE', `/api/v2/credentials/leases/${revoked}`)).json['state'], 'revoked');
    const policyless = await lease({ proxy_policy: null });
    const wide = await lease({ proxy_policy: { hosts: ['*.example.org'], path_prefixes: ['/'], methods: ['GET'] } });
    const cases: [string, Record<string, unknown>, number, string][] = [
      ['missing lease', { lease_id: 'credlease_00000000000000000000000000000000' }, 404, 'credential_proxy.lease_not_found'],
      ['revoked lease', { lease_id: revoked }, 403, 'credential_proxy.lease_revoked'],
      ['other agent', { lease_id: good, agent_id: 'agent-2' }, 403, 'credential_proxy.scope_mismatch'],
      ['other instance', { lease_id: good, instance_id: 'inst-2' }, 403, 'credential_proxy.scope_mismatch'],
      ['other session', { lease_id: good, session_id: 'sess-2' }, 403, 'credential_proxy.scope_mismatch'],
      ['policyless lease', { lease_id: policyless }, 403, 'credential_proxy.policy_missing'],
      ['host outside the policy', { lease_id: good, url: `http://localhost:${up.port}/v1/echo` }, 403, 'credential_proxy.host_not_allowed'],
      ['path outside the policy', { lease_id: good, url: `${upstream}/admin` }, 403, 'credential_proxy.path_not_allowed'],
      ['prefix without a segment boundary', { lease_id: good, url: `${upstream}/v1x` }, 403, 'credential_proxy.path_not_allowed'],
      ['encoded traversal', { lease_id: good, url: `${upstream}/v1/%2e%2e/admin` }, 403, 'credential_proxy.path_not_allowed'],
      ['method outside the policy', { lease_id: good, method: 'DELETE' }, 403, 'credential_proxy.method_not_allowed'],
      ['header outside the allowlist', { lease_id: good, headers: { cookie: 'a=b' } }, 403, 'credential_proxy.header_not_allowed'],
      [
        'workload sets the injected header',
        { lease_id: good, headers: { authorization: 'Bearer mine' } },
        403,
        'credential_proxy.header_not_allowed',
      ],
      ['not http(s)', { lease_id: good, url: `ftp://127.0.0.1:${up.port}/v1/x` }, 403, 'credential_proxy.scheme_not_allowed'],
      [
        'the metadata address, not in the policy',
        { lease_id: good, url: 'http://169.254.169.254/v1/latest' },
        403,
        'credential_proxy.host_not_allowed',
      ],
      [
        'another spelling of the listed address',
        { lease_id: good, url: `http://[::ffff:127.0.0.1]:${up.port}/v1/echo` },
        403,
        'credential_proxy.host_not_allowed',
      ],
      [
        'a wildcard name that does not resolve',
        { lease_id: wide, url: 'http://nothing.example.org/' },
        502,
        'credential_proxy.upstream_unreachable',
      ],
    ];
    const before = { c: up.connections, r: up.requests };
    for (const [what, body, status, code] of cases) {
      const r = await proxy(body);
      assert.equal(r.status, status, `${what}: ${r.text}`);
      assert.equal((r.json['error'] as { code: string }).code, code, what);
    }
    assert.deepEqual({ c: up.connections, r: up.requests }, before, 'no connection or request reached upstream');
  });

  void test('a name that resolves to loopback is refused even when the policy lists it; localhost and the IP literal are not', async () => {
    const name = hostname().toLowerCase();
    const addrs = await lookup(name, { all: true }).catch(() => []);
    const before = up.connections;
    if (name !== 'localhost' && addrs.length > 0 && addrs.every((a) => a.address.startsWith('127.') || a.address === '::1')) {
      const id = await lease({ proxy_policy: { hosts: [name], path_prefixes: ['/v1'], methods: ['GET'] } });
      const r = await proxy({ lease_id: id, url: `http://${name}:${up.port}/v1/echo` });
      assert.equal(r.status, 403, r.text);
      assert.equal((r.json['error'] as { code: string }).code, 'credential_proxy.address_not_allowed');
      assert.equal(up.connections, before);
    }
    const id = await lease({ proxy_policy: { hosts: ['localhost'], path_prefixes: ['/v1'], methods: ['GET'] } });
    const r = await proxy({ lease_id: id, url: `http://localhost:${up.port}/v1/echo` });
    assert.equal(r.status, 200, r.text);
  });

  void test('a 1 s lease is refused after 2 s with no call in between', async () => {
    const id = await lease({ ttl_seconds: 1 });
    // The pause is the behaviour under test: the lease's own expiry.
    await sleep(2000);
    // It expired on its own timer: the event is there before anything asks about the lease.
    const events = await h.call('GET', '/api/v1/events?event_type=credential.lease_expired&limit=5000');
    assert.ok(
      (events.json['events'] as { details: { lease_id: string } }[]).some((e) => e.details.lease_id === id),
      'credential.lease_expired was emitted by the timer',
    );
    const r = await proxy({ lease_id: id });
    assert.equal(r.status, 403);
    assert.equal((r.json['error'] as { code: string }).code, 'credential_proxy.lease_expired');
    const got = await h.call('GET', `/api/v2/credentials/leases/${id}`);
    assert.equal(got.json['state'], 'expired');
    assert.equal(got.json['ended_cause'], 'ttl_elapsed');
  });

  void test('leases: bad ttl and unknown credential are refused; list filters by state; deleting a credential revokes its leases', async () => {
    assert.equal(
      (await h.call('POST', '/api/v2/credentials/leases', { credential: 'echo-token', ...scope, ttl_seconds: 3601 })).status,
      400,
    );
    assert.equal((await h.call('POST', '/api/v2/credentials/leases', { credential: 'echo-token', ...scope, ttl_seconds: 0 })).status, 400);
    assert.equal((await h.call('POST', '/api/v2/credentials/leases', { credential: 'nope', ...scope, ttl_seconds: 60 })).status, 404);
    assert.equal((await h.call('POST', '/api/v2/credentials', { name: 'echo-token', value: 'another-value' })).status, 409);
    assert.equal((await h.call('POST', '/api/v2/credentials', { name: 'short', value: 'x' })).status, 400);
    assert.equal((await h.call('POST', '/api/v2/credentials', { name: 'temp', value: 'temporary-secret' })).status, 201);
    const r = await h.call('POST', '/api/v2/credentials/leases', { credential: 'temp', ...scope, ttl_seconds: 60 });
    const active = await h.call('GET', '/api/v2/credentials/leases?state=active&credential=temp');
    assert.deepEqual(
      (active.json['leases'] as { id: string }[]).map((l) => l.id),
      [r.json['id']],
    );
    const del = await h.call('DELETE', '/api/v2/credentials/temp');
    assert.deepEqual(del.json, { deleted: true, revoked_leases: 1 });
    assert.equal((await h.call('GET', `/api/v2/credentials/leases/${r.json['id'] as string}`)).json['ended_cause'], 'credential_deleted');
    assert.equal((await h.call('GET', '/api/v2/credentials/temp')).status, 404);
  });

  void test('audit: grants, revokes, expiries and every proxy call with its reason code; raw details never; a bad date is 400', async () => {
    const r = await h.call('GET', `/api/v2/credentials/audit?date=${today()}`);
    assert.equal(r.status, 200);
    assert.equal(r.json['available'], true);
    const records = r.json['records'] as Record<string, unknown>[];
    assert.ok(records.length > 0 && records.length <= 200);
    const actions = new Set(records.map((x) => `${x['action'] as string}:${x['outcome'] as string}`));
    for (const a of ['lease.grant:allowed', 'lease.revoke:allowed', 'lease.expire:allowed', 'proxy.http:allowed', 'proxy.http:denied'])
      assert.ok(actions.has(a), a);
    const reasons = new Set(records.map((x) => x['reason_code']));
    assert.ok(reasons.has('credential_proxy.scope_mismatch') && reasons.has('credential_proxy.host_not_allowed'));
    for (const x of records) {
      assert.deepEqual(Object.keys(x).sort(), [
        'action',
        'actor',
        'correlation',
        'id',
        'outcome',
        'reason_code',
        'resource',
        'timestamp',
        'trace_id',
      ]);
    }
    for (const bad of ['2026-13-01', '2026-02-30', 'yesterday', '']) {
      assert.equal((await h.call('GET', `/api/v2/credentials/audit?date=${bad}`)).status, 400, bad);
    }
  });

  void test('at rest: the value is encrypted (not in the database files) with a 0600 key under SECRETS_DIR', async () => {
    const { readFileSync, readdirSync } = await import('node:fs');
    const credDir = join(h.dir, 'credentials');
    assert.equal(statSync(credDir).mode & 0o777, 0o700);
    for (const f of readdirSync(credDir).filter((n) => n.startsWith('credentials.db') || n.startsWith('credential-audit.db'))) {
      const bytes = readFileSync(join(credDir, f));
      assert.equal(bytes.indexOf(SECRET), -1, f);
      assert.equal(bytes.indexOf(Buffer.from(SECRET).toString('base64')), -1, f);
    }
    assert.equal(statSync(join(h.dir, 'secrets', 'credentials.key')).mode & 0o777, 0o600);
  });

  void test('scanner: after the flow, no log line, list, get, event, metric or audit record holds the value or its base64', async () => {
    const leases = await h.call('GET', '/api/v2/credentials/leases');
    const texts = [
      (await import('node:fs')).readFileSync(h.logFile, 'utf8'),
      (await h.call('GET', '/api/v2/credentials')).text,
      (await h.call('GET', '/api/v2/credentials/echo-token')).text,
      leases.text,
      ...(await Promise.all(
        (leases.json['leases'] as { id: string }[]).map(async (l) => (await h.call('GET', `/api/v2/credentials/leases/${l.id}`)).text),
      )),
      (await h.call('GET', '/api/v1/events?limit=5000')).text,
      (await h.call('GET', '/metrics')).text,
      (await h.call('GET', `/api/v2/credentials/audit?date=${today()}`)).text,
    ];
    assert.ok(texts[0]?.includes('credential lease granted'), 'the log was written');
    assert.ok(texts.at(-2)?.includes('svc_credential_proxy_requests_total'), 'the proxy metric is exported');
    const forms = [SECRET, Buffer.from(SECRET).toString('base64'), Buffer.from(SECRET).toString('base64url')];
    for (const [i, t] of texts.entries()) for (const f of forms) assert.ok(!(t ?? '').includes(f), `text ${i} holds a form of the secret`);
  });
});

void describe('credential proxy limits and restarts', () => {
  const up = new EchoUpstream();
  const scope = { agent_id: 'a', instance_id: 'i', session_id: null };
  before(() => up.start());
  after(() => up.stop());

  async function setUp(h: Harness): Promise<string> {
    assert.equal((await h.call('POST', '/api/v2/credentials', { name: 'k', value: SECRET })).status, 201);
    const r = await h.call('POST', '/api/v2/credentials/leases', {
      credential: 'k',
      ...scope,
      ttl_seconds: 600,
      proxy_policy: { hosts: ['127.0.0.1'], path_prefixes: ['/v1'], methods: ['GET'] },
    });
    return r.json['id'] as string;
  }
  const call = (h: Harness, id: string, path: string) =>
    h.call('POST', '/api/v2/credential-proxy/http', {
      lease_id: id,
      ...scope,
      method: 'GET',
      url: `http://127.0.0.1:${up.port}${path}`,
      headers: {},
      body: null,
    });

  void test('a response over the size limit is 502, a silent upstream 504, a compressed answer is decoded before redaction, a redirect is returned, not followed', async () => {
    const h = await startHarness({ SVC_CREDENTIAL_PROXY_TIMEOUT_MS: '500', SVC_CREDENTIAL_PROXY_MAX_RESPONSE_BYTES: '4KiB' });
    try {
      const id = await setUp(h);
      const big = await call(h, id, '/v1/big');
      assert.equal(big.status, 502, big.text);
      assert.equal((big.json['error'] as { code: string }).code, 'credential_proxy.response_too_large');
      const silent = await call(h, id, '/v1/silent');
      assert.equal(silent.status, 504, silent.text);
      assert.equal((silent.json['error'] as { code: string }).code, 'credential_proxy.upstream_timeout');
      const gz = await call(h, id, '/v1/gzip');
      assert.equal(gz.status, 200, gz.text);
      assert.equal(up.seen.at(-1)?.headers['accept-encoding'], 'identity');
      assert.equal(gz.json['body'], 'echo: Bearer [REDACTED]', 'a compressed answer is decoded, then redacted');
      assert.equal((gz.json['headers'] as Record<string, string>)['content-encoding'], undefined);
      const zstd = await call(h, id, '/v1/zstd');
      assert.equal(zstd.status, 502, zstd.text);
      assert.equal((zstd.json['error'] as { code: string }).code, 'credential_proxy.response_encoding');
      assert.ok(!gz.text.includes(SECRET) && !zstd.text.includes(SECRET));
      const requests = up.requests;
      const redirect = await call(h, id, '/v1/redirect');
      assert.equal(redirect.json['status'], 302);
      assert.equal(up.requests, requests + 1, 'the redirect was not followed');
      const audit = await h.call('GET', `/api/v2/credentials/audit?date=${today()}`);
      const outcomes = (audit.json['records'] as { outcome: string; reason_code: string | null }[]).map(
        (r) => `${r.outcome}:${r.reason_code}`,
      );
      assert.ok(
        outcomes.includes('error:credential_proxy.response_too_large') && outcomes.includes('error:credential_proxy.upstream_timeout'),
      );
    } finally {
      await h.stop();
    }
  });

  void test('credentials and leases survive a restart (the sealed value opens with the key in SECRETS_DIR)', async () => {
    const first = await startHarness({}, [], { keepDir: true });
    const id = await setUp(first);
    await first.stop();
    const second = await startHarness({}, [], { dir: first.dir });
    try {
      assert.equal((await second.call('GET', `/api/v2/credentials/leases/${id}`)).json['state'], 'active');
      const r = await call(second, id, '/v1/echo');
      assert.equal(r.status, 200, r.text);
      assert.equal(up.seen.at(-1)?.headers.authorization, `Bearer ${SECRET}`);
    } finally {
      await second.stop();
    }
  });
});

void describe('credentials: permissions and the audit switch', () => {
  void test('a viewer is refused credentials.lease with 403 auth.permission_denied; the local listener is admin', async () => {
    const identity: Component = {
      name: 'test-identity',
      start(ctx) {
        ctx.provide(
          'operatorIdentity',
          new OperatorIdentity({
            trustDomain: ctx.config.trustDomain,
            localRole: 'admin',
            roles: () => ({ ok: true, roles: new Map([['bob', 'viewer'] as const]) }),
          }),
        );
        return Promise.resolve({ stop: () => Promise.resolve() });
      },
    };
    const h = await startHarness({}, [identity]);
    try {
      const bob = { transport: 'mtls' as const, spiffeId: `spiffe://${h.server.config.trustDomain}/operator/bob`, fingerprint256: 'AA' };
      assert.equal((await h.call('POST', '/api/v2/credentials', { name: 'k', value: 'value-1234' })).status, 201);
      const body = { credential: 'k', agent_id: 'a', instance_id: 'i', ttl_seconds: 60 };
      const r = await inject(h.server.router, { method: 'POST', url: '/api/v2/credentials/leases', body, peer: bob });
      assert.equal(r.status, 403);
      assert.deepEqual((r.json() as { error: { code: string } }).error.code, 'auth.permission_denied');
      assert.match(r.text, /credentials\.lease/);
      assert.equal((await inject(h.server.router, { method: 'GET', url: '/api/v2/credentials', peer: bob })).status, 200);
      assert.equal(
        (await inject(h.server.router, { method: 'POST', url: '/api/v2/credential-proxy/http', body: {}, peer: bob })).status,
        403,
      );
    } finally {
      await h.stop();
    }
  });

  void test('SVC_CREDENTIAL_AUDIT=off: the audit answers available false and an empty list, and no audit file is written', async () => {
    const h = await startHarness({ SVC_CREDENTIAL_AUDIT: 'off' });
    try {
      const r = await h.call('GET', `/api/v2/credentials/audit?date=${today()}`);
      assert.deepEqual(r.json, { available: false, date: today(), records: [] });
      assert.equal((await h.call('GET', '/api/v2/credentials/audit?date=bad')).status, 400);
      assert.throws(() => statSync(join(h.dir, 'credentials', 'credential-audit.db')));
    } finally {
      await h.stop();
    }
  });
});
