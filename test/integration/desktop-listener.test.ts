/**
 * The desktop listener's request table (issue 22 "How it is judged"), over real HTTPS with real
 * certificates and real Ed25519 tokens: what is refused, with which status and problem code, and
 * whether the token authority was consulted. Pre-check refusals (no client certificate, two
 * Authorization headers, a query string, a body on a no-body route, a missing token, an oversized
 * or slow body) never consult it; token refusals (expired, foreign workspace, bad signature,
 * wrong audience) do, once.
 */
import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { issueOperatorCert } from '../../src/identity/ca.js';
import { DesktopBed, type Reply } from './desktop-harness.js';

const bed = new DesktopBed();

function assertProblem(r: Reply, status: number, code: string): void {
  assert.equal(r.status, status, r.text);
  assert.equal(r.headers['content-type'], 'application/problem+json');
  assert.equal(r.headers['cache-control'], 'no-store');
  assert.equal(r.json['status'], status);
  assert.equal(r.json['code'], code);
  assert.equal(typeof r.json['title'], 'string');
  assert.equal(typeof r.json['detail'], 'string');
  assert.equal(r.json['type'], `urn:sandboxd:problem:${code}`);
}

describe('desktop listener: the request table', () => {
  let token: string;
  let desktopId: string;

  before(async () => {
    await bed.start();
    token = await bed.token();
    const enrolled = await bed.enroll('vm-table', token);
    assert.equal(enrolled.status, 200, enrolled.text);
    const created = await bed.as(token, 'POST', '/api/v2/instances/vm-table/desktop-sessions', { idempotency_key: 'table-1' });
    assert.equal(created.status, 200, created.text);
    desktopId = created.json['desktop_id'] as string;
  });

  after(() => bed.stop());

  /** Runs `fn` and returns how often the authority was consulted meanwhile. */
  async function consultedDuring(fn: () => Promise<void>): Promise<number> {
    const before = bed.consulted;
    await fn();
    return bed.consulted - before;
  }

  const get = (): string => `/api/v2/desktop-sessions/${desktopId}`;
  const attach = (): string => `/api/v2/desktop-sessions/${desktopId}/attach`;

  test('a good request passes: 200, no-store, the authority consulted once', async () => {
    const n = await consultedDuring(async () => {
      const r = await bed.as(token, 'GET', get());
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers['cache-control'], 'no-store');
      assert.equal(r.json['desktop_id'], desktopId);
    });
    assert.equal(n, 1);
  });

  const preChecks: [string, () => Promise<Reply>, number, string][] = [
    ['no client certificate', () => bed.call(get(), { cert: null, authorization: [`Bearer ${token}`] }), 403, 'access_denied'],
    [
      'an operator certificate of another CA',
      () => bed.call(get(), { cert: bed.foreign, authorization: [`Bearer ${token}`] }),
      403,
      'access_denied',
    ],
    [
      'an expired operator certificate',
      () => bed.call(get(), { cert: bed.expired, authorization: [`Bearer ${token}`] }),
      403,
      'access_denied',
    ],
    [
      "an agent's certificate (not an operator's)",
      () => bed.call(get(), { cert: bed.agent, authorization: [`Bearer ${token}`] }),
      403,
      'access_denied',
    ],
    [
      'two Authorization headers',
      () => bed.call(get(), { authorization: [`Bearer ${token}`, `Bearer ${token}`] }),
      400,
      'invalid_resource_request',
    ],
    ['a query string', () => bed.call(`${get()}?x=1`, { authorization: [`Bearer ${token}`] }), 400, 'invalid_resource_request'],
    ['an empty query string', () => bed.call(`${get()}?`, { authorization: [`Bearer ${token}`] }), 400, 'invalid_resource_request'],
    [
      'a body on attach',
      () => bed.call(attach(), { method: 'POST', authorization: [`Bearer ${token}`], body: '{}' }),
      400,
      'invalid_resource_request',
    ],
    ['no Authorization header', () => bed.call(get(), {}), 403, 'access_denied'],
    ['a Basic Authorization header', () => bed.call(get(), { authorization: ['Basic YWxpY2U6cHc='] }), 403, 'access_denied'],
    [
      'a body over 8192 bytes',
      () =>
        bed.call('/api/v2/instances/vm-table/desktop-sessions', {
          method: 'POST',
          authorization: [`Bearer ${token}`],
          body: JSON.stringify({ idempotency_key: 'k', pad: 'x'.repeat(9000) }),
        }),
      400,
      'invalid_resource_request',
    ],
    ['an unknown path', () => bed.call('/api/v2/desktop-sessions', { authorization: [`Bearer ${token}`] }), 404, 'desktop.route_not_found'],
    ['a wrong method', () => bed.call(get(), { method: 'DELETE', authorization: [`Bearer ${token}`] }), 405, 'desktop.method_not_allowed'],
  ];
  for (const [what, send, status, code] of preChecks) {
    test(`${what}: ${status} ${code}, the authority not consulted`, async () => {
      const n = await consultedDuring(async () => assertProblem(await send(), status, code));
      assert.equal(n, 0);
    });
  }

  test('a body that does not arrive within 1 s is cut off: 408, the authority not consulted', async () => {
    const n = await consultedDuring(async () => {
      const raw = await bed.slowBody('/api/v2/instances/vm-table/desktop-sessions', token, 100, '{"idempotency_key":');
      assert.match(raw, /^HTTP\/1\.1 408 /);
      assert.match(raw, /content-type: application\/problem\+json/i);
      assert.match(raw, /cache-control: no-store/i);
      assert.match(raw, /"code":"desktop\.body_timeout"/);
    });
    assert.equal(n, 0);
  });

  const tokenRefusals: [string, () => Promise<string>][] = [
    ['an expired token', () => bed.token({ expSecondsFromNow: -60 })],
    ["another workspace's token", () => bed.token({ workspace: 'ws-b' })],
    ['a token signed by another key', () => bed.token({}, bed.stranger.privateKey)],
    ['a token for another audience', () => bed.token({ aud: 'someone-else' })],
    ['a token of another issuer', () => bed.token({ iss: 'mallory' })],
    ["another subject's token", () => bed.token({ sub: 'bob' })],
  ];
  for (const [what, make] of tokenRefusals) {
    test(`${what}: 403 access_denied after consulting the authority`, async () => {
      const t = await make();
      const n = await consultedDuring(async () => assertProblem(await bed.as(t, 'GET', get()), 403, 'access_denied'));
      assert.equal(n, 1);
    });
  }

  test('a certificate-bound token (cnf x5t#S256) is usable only with that certificate', async () => {
    const thumbprint = (cert: { certPem: string }): string =>
      createHash('sha256').update(new X509Certificate(cert.certPem).raw).digest('base64url');
    const bound = await bed.token({ cnf: { 'x5t#S256': thumbprint(bed.operator) } });
    assert.equal((await bed.as(bound, 'GET', get())).status, 200);
    const other = await bed.token({ cnf: { 'x5t#S256': thumbprint(bed.agent) } });
    assertProblem(await bed.as(other, 'GET', get()), 403, 'access_denied');
    const malformed = await bed.token({ cnf: { jkt: 'x' } });
    assertProblem(await bed.as(malformed, 'GET', get()), 403, 'access_denied');
  });

  test('a token that is not a JWS is refused: 403', async () => {
    assertProblem(await bed.as('not.a-token', 'GET', get()), 403, 'access_denied');
  });

  test('an authority that fails: 503 route_unavailable', async () => {
    bed.authorityDown = true;
    try {
      const n = await consultedDuring(async () => assertProblem(await bed.as(token, 'GET', get()), 503, 'route_unavailable'));
      assert.equal(n, 1);
    } finally {
      bed.authorityDown = false;
    }
    assert.equal((await bed.as(token, 'GET', get())).status, 200);
  });

  test("another workspace's token cannot use the instance either", async () => {
    const other = await bed.token({ workspace: 'ws-b' });
    assertProblem(await bed.as(other, 'GET', '/api/v2/instances/vm-table/desktop-capability'), 403, 'access_denied');
    assertProblem(await bed.enroll('vm-table', other), 403, 'access_denied');
    assertProblem(
      await bed.as(other, 'POST', '/api/v2/instances/vm-table/desktop-sessions', { idempotency_key: 'table-1' }),
      403,
      'access_denied',
    );
  });

  test('an unknown desktop id is answered like a foreign one: 403 access_denied', async () => {
    assertProblem(await bed.as(token, 'GET', `/api/v2/desktop-sessions/desktop_${'0'.repeat(32)}`), 403, 'access_denied');
  });

  test('refusals are counted by code, answers by route', async () => {
    const text = await bed.server.metrics.registry.metrics();
    assert.match(text, /svc_desktop_refusals_total\{code="invalid_resource_request"\} [1-9]/);
    assert.match(text, /svc_desktop_refusals_total\{code="access_denied"\} [1-9]/);
    assert.match(text, /svc_desktop_requests_total\{route="\/api\/v2\/desktop-sessions\/\{desktop_id\}",status_class="2xx"\} [1-9]/);
  });

  test('no token or grant appears in the log', () => {
    const log = bed.logLines.join('\n');
    assert.ok(bed.logLines.length > 0);
    assert.ok(!log.includes(token), 'the token is logged');
    assert.ok(!log.includes(token.split('.')[2]!), 'the token signature is logged');
    assert.doesNotMatch(log, /Bearer|dgr_/);
  });
});

describe('desktop listener with SVC_DESKTOP_CLIENT_CA', () => {
  const own = new DesktopBed({ clientCa: true });
  before(() => own.start());
  after(() => own.stop());

  test("a certificate of the configured client CA gets in; an operator certificate of sandboxd's CA does not", async () => {
    const token = await own.token();
    const ok = await own.as(token, 'GET', '/api/v2/instances/vm-ca/desktop-capability');
    assert.equal(ok.status, 200, ok.text);
    const before = own.consulted;
    const operator = await issueOperatorCert(own.ca, { name: 'alice' });
    assertProblem(
      await own.call('/api/v2/instances/vm-ca/desktop-capability', { cert: operator, authorization: [`Bearer ${token}`] }),
      403,
      'access_denied',
    );
    assert.equal(own.consulted, before);
  });
});
