import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { classifyAddress } from '../../../src/credentials/address-class.js';
import { SvcError } from '../../../src/core/errors.js';
import { checkTarget, matchPath, parsePolicy, type ProxyPolicy } from '../../../src/credentials/policy.js';
import { checkLease, redact, redactionForms, REDACTED, type ProxyCall } from '../../../src/credentials/proxy.js';
import type { LeaseRecord } from '../../../src/credentials/lease-types.js';

const policy: ProxyPolicy = parsePolicy(
  {
    hosts: ['api.example.com', '*.git.example.org', 'svc.local:8443', '[::1]'],
    path_prefixes: ['/v1', '/repos/'],
    methods: ['get', 'POST'],
    header_allowlist: ['Content-Type', 'x-trace'],
  },
  'authorization',
);

const target = (url: string, method = 'GET', headerNames: string[] = []) => checkTarget(policy, { url: new URL(url), method, headerNames });

void describe('credential proxy policy matcher', () => {
  void test('normalises: hosts and headers lower-case, methods upper-case', () => {
    assert.deepEqual(policy.methods, ['GET', 'POST']);
    assert.deepEqual(policy.header_allowlist, ['content-type', 'x-trace']);
  });

  void test('hosts: exact, *.suffix (not the bare suffix), host:port, [ipv6]', () => {
    assert.deepEqual(target('https://api.example.com/v1/chat'), { code: null, host: 'exact' });
    assert.deepEqual(target('https://API.example.com:9999/v1'), { code: null, host: 'exact' });
    assert.deepEqual(target('https://a.b.git.example.org/repos/x'), { code: null, host: 'wildcard' });
    assert.equal(target('https://git.example.org/repos/x').code, 'credential_proxy.host_not_allowed');
    assert.equal(target('https://evilapi.example.com/v1').code, 'credential_proxy.host_not_allowed');
    assert.equal(target('https://api.example.com.evil.net/v1').code, 'credential_proxy.host_not_allowed');
    assert.equal(target('https://svc.local:8443/v1').code, null);
    assert.equal(target('https://svc.local/v1').code, 'credential_proxy.host_not_allowed');
    assert.equal(target('http://[::1]:8080/v1').code, null);
    assert.equal(target('https://user:pw@api.example.com/v1').code, 'credential_proxy.host_not_allowed');
  });

  void test('schemes other than http(s) are denied', () => {
    assert.equal(target('ftp://api.example.com/v1').code, 'credential_proxy.scheme_not_allowed');
    assert.equal(target('file:///etc/passwd').code, 'credential_proxy.scheme_not_allowed');
  });

  void test('paths: prefix at a segment boundary; encoded slashes and dot segments refused', () => {
    assert.equal(matchPath(policy, '/v1'), true);
    assert.equal(matchPath(policy, '/v1/models'), true);
    assert.equal(matchPath(policy, '/v1x'), false);
    assert.equal(matchPath(policy, '/repos/a'), true);
    assert.equal(matchPath(policy, '/repos'), false);
    assert.equal(matchPath(policy, '/v1/%2e%2e/admin'), false);
    assert.equal(matchPath(policy, '/v1%2F..%2Fadmin'), false);
    // The URL parser removes plain dot segments before the matcher sees the path.
    assert.equal(target('https://api.example.com/v1/../admin').code, 'credential_proxy.path_not_allowed');
  });

  void test('methods and header allowlist', () => {
    assert.equal(target('https://api.example.com/v1', 'DELETE').code, 'credential_proxy.method_not_allowed');
    assert.equal(target('https://api.example.com/v1', 'POST', ['content-type']).code, null);
    assert.equal(target('https://api.example.com/v1', 'POST', ['cookie']).code, 'credential_proxy.header_not_allowed');
  });

  void test('a policy cannot allowlist framing headers or the injected header; empty lists are refused', () => {
    const base = { hosts: ['a.example'], path_prefixes: ['/'], methods: ['GET'] };
    for (const h of ['host', 'content-length', 'Authorization', 'transfer-encoding']) {
      assert.throws(() => parsePolicy({ ...base, header_allowlist: [h] }, 'authorization'), SvcError);
    }
    assert.throws(() => parsePolicy({ ...base, hosts: [] }, 'authorization'), SvcError);
    assert.throws(() => parsePolicy({ ...base, path_prefixes: ['v1'] }, 'authorization'), SvcError);
    assert.throws(() => parsePolicy({ ...base, extra: 1 }, 'authorization'), SvcError);
    assert.deepEqual(parsePolicy(base, 'authorization').header_allowlist, []);
  });
});

void describe('address classification', () => {
  const cases: [string, string][] = [
    ['8.8.8.8', 'public'],
    ['10.1.2.3', 'public'],
    ['192.168.1.1', 'public'],
    ['fd00::1', 'public'],
    ['2001:db8::1', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['169.254.169.254', 'metadata'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['169.254.10.1', 'link_local'],
    ['fe80::1', 'link_local'],
    ['fe80::1%eth0', 'link_local'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['::ffff:0.0.0.0', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
  ];
  for (const [addr, cls] of cases) {
    void test(`${addr} is ${cls}`, () => assert.equal(classifyAddress(addr), cls));
  }
  void test('a name is not an address', () => assert.equal(classifyAddress('localhost'), null));
});

void describe('lease checks and redaction', () => {
  const lease: LeaseRecord = {
    id: 'credlease_1',
    credential: 'c',
    agent_id: 'a1',
    instance_id: 'i1',
    session_id: 's1',
    actor: 'local',
    ttl_seconds: 60,
    issued_at: new Date(1000).toISOString(),
    expires_at: new Date(61_000).toISOString(),
    state: 'active',
    revoked_at: null,
    ended_cause: null,
    proxy_policy: policy,
  };
  const call: ProxyCall = {
    lease_id: 'credlease_1',
    agent_id: 'a1',
    instance_id: 'i1',
    session_id: 's1',
    method: 'GET',
    url: 'https://api.example.com/v1',
    headers: {},
    body: null,
  };
  void test('each lease problem has its code', () => {
    assert.equal(checkLease(lease, call, 2000), null);
    assert.equal(checkLease(undefined, call, 2000)?.code, 'credential_proxy.lease_not_found');
    assert.equal(checkLease({ ...lease, state: 'revoked' }, call, 2000)?.code, 'credential_proxy.lease_revoked');
    assert.equal(checkLease({ ...lease, state: 'expired' }, call, 2000)?.code, 'credential_proxy.lease_expired');
    assert.equal(checkLease(lease, call, 61_000)?.code, 'credential_proxy.lease_expired');
    assert.equal(checkLease(lease, { ...call, agent_id: 'a2' }, 2000)?.code, 'credential_proxy.scope_mismatch');
    assert.equal(checkLease(lease, { ...call, instance_id: 'i2' }, 2000)?.code, 'credential_proxy.scope_mismatch');
    assert.equal(checkLease(lease, { ...call, session_id: null }, 2000)?.code, 'credential_proxy.scope_mismatch');
    assert.equal(checkLease({ ...lease, session_id: null }, { ...call, session_id: 'other' }, 2000), null);
    assert.equal(checkLease({ ...lease, proxy_policy: null }, call, 2000)?.code, 'credential_proxy.policy_missing');
  });

  void test('the value, its base64 (padded or not), base64url and URL-encoded forms are redacted', () => {
    const secret = 'sk-live+/abc?123';
    const forms = redactionForms(secret);
    const b64 = Buffer.from(secret).toString('base64');
    const text = `a ${secret} b ${b64} c ${Buffer.from(secret).toString('base64url')} d ${encodeURIComponent(secret)}`;
    const out = redact(text, forms);
    for (const f of forms) assert.ok(!out.includes(f), f);
    assert.equal(out.split(REDACTED).length - 1, 4);
  });

  void test('a value with quotes or backslashes is also redacted in its JSON-escaped form', () => {
    const secret = 'pa"ss\\word-123';
    const echoed = JSON.stringify({ token: secret });
    assert.equal(redact(echoed, redactionForms(secret)), `{"token":"${REDACTED}"}`);
  });
});
