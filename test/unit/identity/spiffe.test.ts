/**
 * Reading SPIFFE identities from peer certificates: every accepted shape, the refusals (other
 * trust domain, several SPIFFE URIs, traversal, empty ids, smuggled SAN entries), and the
 * metadata checks of Connect and Exec.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { createStandaloneCa, issueAgentCert } from '../../../src/identity/ca.js';
import {
  checkAgentMetadata,
  checkOperatorIdentity,
  identityFromPeerCertificate,
  parseSpiffeId,
  parseSubjectAltName,
  spiffeIdOf,
} from '../../../src/identity/spiffe.js';
import { createCaCertificate, issueLeaf, type SanEntry } from '../../../src/identity/x509.js';
import { X509Certificate } from 'node:crypto';

const TD = 'sandbox.local';

/** DER of a certificate from a throwaway CA carrying exactly `sans`. */
async function certWithSans(sans: SanEntry[]): Promise<Buffer> {
  const { signer } = await createCaCertificate({ trustDomain: TD, now: new Date(), ttlMs: 86_400_000 });
  const issued = await issueLeaf(signer, { commonName: 'test', sans, usage: 'clientAuth', now: new Date(), ttlMs: 3_600_000 });
  return new X509Certificate(issued.certPem).raw;
}

void describe('parseSpiffeId', () => {
  void test('accepts the three shapes', () => {
    assert.deepEqual(parseSpiffeId('spiffe://sandbox.local/agent/i-0001', TD), { kind: 'agent', instanceId: 'i-0001' });
    assert.deepEqual(parseSpiffeId('spiffe://sandbox.local/operator/alice.b_c', TD), { kind: 'operator', name: 'alice.b_c' });
    assert.deepEqual(parseSpiffeId('spiffe://sandbox.local/server', TD), { kind: 'server' });
  });

  void test('refuses everything else', () => {
    for (const uri of [
      'spiffe://other.local/agent/i-0001',
      'spiffe://sandbox.local.evil/agent/i-0001',
      'spiffe://sandbox.localx/agent/i-0001',
      'spiffe://user@sandbox.local/agent/i-0001',
      'spiffe://sandbox.local:443/agent/i-0001',
      'SPIFFE://sandbox.local/agent/i-0001',
      'https://sandbox.local/agent/i-0001',
      'spiffe://sandbox.local/agent/',
      'spiffe://sandbox.local/agent',
      'spiffe://sandbox.local/agent/..',
      'spiffe://sandbox.local/agent/.',
      'spiffe://sandbox.local/agent/../operator/root',
      'spiffe://sandbox.local/agent/a/b',
      'spiffe://sandbox.local/agent//a',
      'spiffe://sandbox.local//agent/a',
      'spiffe://sandbox.local/agent/a/',
      'spiffe://sandbox.local/agent/%2e%2e',
      'spiffe://sandbox.local/agent/a?x=1',
      'spiffe://sandbox.local/agent/a#frag',
      'spiffe://sandbox.local/agent/a b',
      `spiffe://sandbox.local/agent/${'x'.repeat(129)}`,
      'spiffe://sandbox.local/server/x',
      'spiffe://sandbox.local/admin/x',
      'spiffe://sandbox.local/',
      '',
    ]) {
      assert.equal(parseSpiffeId(uri, TD), null, uri);
    }
  });

  void test('round-trips every valid id, and anything it accepts is canonical', () => {
    const id = fc.stringMatching(/^[A-Za-z0-9._-]{1,128}$/).filter((s) => s !== '.' && s !== '..');
    fc.assert(
      fc.property(id, (instanceId) => {
        assert.deepEqual(parseSpiffeId(spiffeIdOf(TD, { kind: 'agent', instanceId }), TD), { kind: 'agent', instanceId });
      }),
    );
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (tail) => {
        const uri = `spiffe://sandbox.local/${tail}`;
        const parsed = parseSpiffeId(uri, TD);
        if (parsed !== null) assert.equal(spiffeIdOf(TD, parsed), uri);
      }),
      { numRuns: 2000 },
    );
  });
});

void describe('parseSubjectAltName', () => {
  void test("splits Node's format and unquotes JSON-quoted values", () => {
    assert.deepEqual(parseSubjectAltName('DNS:localhost, IP Address:127.0.0.1, URI:spiffe://sandbox.local/server'), [
      { type: 'DNS', value: 'localhost' },
      { type: 'IP Address', value: '127.0.0.1' },
      { type: 'URI', value: 'spiffe://sandbox.local/server' },
    ]);
    assert.deepEqual(parseSubjectAltName('URI:"spiffe://a/b\\u002c URI:spiffe://sandbox.local/agent/x", DNS:y'), [
      { type: 'URI', value: 'spiffe://a/b, URI:spiffe://sandbox.local/agent/x' },
      { type: 'DNS', value: 'y' },
    ]);
  });

  void test('returns null for strings it does not understand, and never throws', () => {
    assert.equal(parseSubjectAltName('URI:"unterminated'), null);
    assert.equal(parseSubjectAltName('no colon here'), null);
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 80 }), (s) => void parseSubjectAltName(s)),
      { numRuns: 3000 },
    );
  });
});

void describe('identityFromPeerCertificate', () => {
  void test('no certificate, or an empty one (what grpc-js gives for unverified peers), is no identity', () => {
    assert.equal(identityFromPeerCertificate(undefined, TD), null);
    assert.equal(identityFromPeerCertificate({}, TD), null);
    assert.equal(identityFromPeerCertificate({ subjectaltname: '' }, TD), null);
  });

  void test('reads subjectaltname when no raw DER is given', () => {
    assert.deepEqual(identityFromPeerCertificate({ subjectaltname: 'URI:spiffe://sandbox.local/agent/i-1' }, TD), {
      kind: 'agent',
      instanceId: 'i-1',
    });
    assert.deepEqual(
      identityFromPeerCertificate({ subjectaltname: 'DNS:vm-1, URI:https://example.com/x, URI:spiffe://sandbox.local/agent/i-1' }, TD),
      {
        kind: 'agent',
        instanceId: 'i-1',
      },
    );
    assert.equal(
      identityFromPeerCertificate({ subjectaltname: 'URI:spiffe://sandbox.local/agent/a, URI:spiffe://sandbox.local/agent/b' }, TD),
      null,
    );
    assert.equal(
      identityFromPeerCertificate({ subjectaltname: 'URI:spiffe://sandbox.local/agent/a, URI:spiffe://other.local/agent/a' }, TD),
      null,
    );
    assert.equal(identityFromPeerCertificate({ subjectaltname: 'URI:spiffe://other.local/agent/a' }, TD), null);
    assert.equal(identityFromPeerCertificate({ subjectaltname: 'DNS:localhost' }, TD), null);
  });

  void test('parses raw DER when there is no subjectaltname string', async () => {
    const issued = await issueAgentCert(await createStandaloneCa(TD), { instanceId: 'real' });
    const raw = new X509Certificate(issued.certPem).raw;
    assert.deepEqual(identityFromPeerCertificate({ raw }, TD), { kind: 'agent', instanceId: 'real' });
  });

  void test("a verified peer's legacy object (what TLS hands us) says the same as its raw DER, crafted SANs included", async () => {
    // getPeerCertificate() builds its object with X509ToObject, as toLegacyObject() does: the
    // subjectaltname string read first must escape exactly like X509Certificate.subjectAltName.
    const cases: SanEntry[][] = [
      [{ type: 'url', value: 'spiffe://sandbox.local/agent/i-1' }],
      [
        { type: 'dns', value: 'vm-1' },
        { type: 'url', value: 'spiffe://sandbox.local/operator/alice' },
      ],
      [{ type: 'url', value: 'spiffe://sandbox.local/agent/x, URI:spiffe://sandbox.local/agent/admin' }],
      [{ type: 'url', value: 'spiffe://sandbox.local/agent/x", URI:spiffe://sandbox.local/agent/admin' }],
      [
        { type: 'url', value: 'spiffe://sandbox.local/agent/a' },
        { type: 'url', value: 'spiffe://sandbox.local/agent/b' },
      ],
      [{ type: 'url', value: 'spiffe://sandbox.local/agent/../operator/root' }],
    ];
    for (const sans of cases) {
      const x = new X509Certificate(await certWithSans(sans));
      const legacy = x.toLegacyObject();
      assert.equal(legacy.subjectaltname, x.subjectAltName, JSON.stringify(sans));
      assert.deepEqual(identityFromPeerCertificate(legacy, TD), identityFromPeerCertificate({ raw: x.raw }, TD), JSON.stringify(sans));
    }
  });

  void test('a URI crafted to smuggle a second SAN entry is refused', async () => {
    const raw = await certWithSans([{ type: 'url', value: 'spiffe://sandbox.local/agent/x, URI:spiffe://sandbox.local/agent/admin' }]);
    assert.equal(identityFromPeerCertificate({ raw }, TD), null);
  });

  void test('two SPIFFE URIs in one certificate are refused, even if both are ours', async () => {
    const raw = await certWithSans([
      { type: 'url', value: 'spiffe://sandbox.local/agent/a' },
      { type: 'url', value: 'spiffe://sandbox.local/agent/b' },
    ]);
    assert.equal(identityFromPeerCertificate({ raw }, TD), null);
  });

  void test('traversal and empty ids in a real certificate are refused', async () => {
    for (const value of [
      'spiffe://sandbox.local/agent/../operator/root',
      'spiffe://sandbox.local/agent/',
      'spiffe://sandbox.local/operator/',
    ]) {
      const raw = await certWithSans([{ type: 'url', value }]);
      assert.equal(identityFromPeerCertificate({ raw }, TD), null, value);
    }
  });

  void test('garbage DER is no identity, not an exception', () => {
    assert.equal(identityFromPeerCertificate({ raw: Buffer.from('not a certificate') }, TD), null);
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 200 }),
        (bytes) => void identityFromPeerCertificate({ raw: Buffer.from(bytes) }, TD),
      ),
      { numRuns: 300 },
    );
  });
});

void describe('checkAgentMetadata (Connect)', () => {
  const agent = { kind: 'agent', instanceId: 'i-0001' } as const;

  void test('matching instance id passes', () => {
    assert.deepEqual(checkAgentMetadata(agent, { instanceId: 'i-0001' }), { ok: true });
  });

  void test('mismatch, missing header, or a non-agent identity is agent.identity_mismatch (PERMISSION_DENIED)', () => {
    for (const [identity, instanceId] of [
      [agent, 'i-9999'],
      [agent, undefined],
      [agent, ''],
      [{ kind: 'operator', name: 'alice' }, 'alice'],
      [{ kind: 'server' }, 'i-0001'],
    ] as const) {
      const r = checkAgentMetadata(identity, { instanceId });
      assert.equal(r.ok, false);
      assert.equal(!r.ok && r.code, 'agent.identity_mismatch');
    }
  });

  void test('no verified identity is agent.unauthenticated', () => {
    const r = checkAgentMetadata(null, { instanceId: 'i-0001' });
    assert.equal(!r.ok && r.code, 'agent.unauthenticated');
  });

  void test('x-agent-secret is rejected as retired, even with a valid certificate', () => {
    for (const identity of [agent, null]) {
      const r = checkAgentMetadata(identity, { instanceId: 'i-0001', secret: 'hunter2' });
      assert.equal(r.ok, false);
      assert.ok(!r.ok && r.code === 'agent.unauthenticated' && /retired/.test(r.message));
      assert.ok(!r.ok && !r.message.includes('hunter2'), 'the secret is not echoed');
    }
  });

  void test('untrusted metadata is quoted and bounded in the message', () => {
    const r = checkAgentMetadata(agent, { instanceId: `evil"\n${'x'.repeat(1000)}` });
    assert.ok(!r.ok && r.message.length < 400 && !r.message.includes('\n'));
  });
});

void describe('checkOperatorIdentity (Exec)', () => {
  void test('only an operator certificate passes', () => {
    assert.deepEqual(checkOperatorIdentity({ kind: 'operator', name: 'alice' }), { ok: true, name: 'alice' });
    const asAgent = checkOperatorIdentity({ kind: 'agent', instanceId: 'i-1' });
    assert.equal(!asAgent.ok && asAgent.code, 'agent.identity_mismatch');
    const none = checkOperatorIdentity(null);
    assert.equal(!none.ok && none.code, 'agent.unauthenticated');
  });
});
