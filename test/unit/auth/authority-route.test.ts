import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { adminPeer } from '../../../src/auth/component.js';
import { OperatorIdentity, type RolesTable } from '../../../src/auth/operator-identity.js';
import { ROLE_PERMISSIONS } from '../../../src/auth/permissions.js';
import { registerAuthRoutes } from '../../../src/auth/routes.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { createStandaloneCa, issueAgentCert, issueOperatorCert } from '../../../src/identity/ca.js';
import { X509Certificate } from 'node:crypto';

const TD = 'sandboxd.test';

function routerWith(table: RolesTable): Router {
  const router = new Router();
  registerAuthRoutes(router, { identity: new OperatorIdentity({ trustDomain: TD, localRole: 'viewer', roles: () => table }) });
  return router;
}

void describe('GET /api/v2/credentials/authority', () => {
  void test('answers the resolved authority with its compiled schema, not cached', async () => {
    const router = routerWith({ ok: true, roles: new Map([['alice', 'admin']]) });
    const local = await inject(router, { method: 'GET', url: '/api/v2/credentials/authority' });
    assert.equal(local.status, 200);
    assert.equal(local.headers['cache-control'], 'no-store');
    assert.deepEqual(local.json(), {
      schema_version: 'management.access-authority/v1',
      mode: 'local',
      actor: 'local',
      role: 'viewer',
      permissions: [...ROLE_PERMISSIONS.viewer],
      ssh_identity: false,
      fail_closed: false,
    });
    const peer = { transport: 'mtls', spiffeId: `spiffe://${TD}/operator/alice`, fingerprint256: 'AB:CD' } as const;
    const alice = await inject(router, { method: 'GET', url: '/api/v2/credentials/authority', peer });
    assert.equal((alice.json() as { role: string }).role, 'admin');
  });

  void test('an unusable roles table: no permissions, fail_closed and the reason on the wire', async () => {
    const router = routerWith({ ok: false, reason: 'the roles file is not valid JSON' });
    const peer = { transport: 'mtls', spiffeId: `spiffe://${TD}/operator/alice`, fingerprint256: 'AB:CD' } as const;
    const r = await inject(router, { method: 'GET', url: '/api/v2/credentials/authority', peer });
    assert.equal(r.status, 200);
    const who = r.json() as Record<string, unknown>;
    assert.equal(who['fail_closed'], true);
    assert.equal(who['role'], null);
    assert.equal(who['actor'], 'alice');
    assert.deepEqual(who['permissions'], []);
    assert.match(String(who['reason']), /not valid JSON/);
  });
});

void describe('adminPeer (who gets past the admin listener)', () => {
  void test("an operator certificate becomes an mtls peer with its SPIFFE ID; an agent's or another trust domain's is identity.operator_required", async () => {
    const ca = await createStandaloneCa(TD);
    const asPeer = (pem: string) => {
      const x = new X509Certificate(pem);
      return { raw: x.raw, subjectaltname: x.subjectAltName ?? '', fingerprint256: x.fingerprint256 };
    };
    const op = asPeer((await issueOperatorCert(ca, { name: 'alice' })).certPem);
    const ok = adminPeer(op, TD);
    assert.ok(ok.ok);
    assert.deepEqual(ok.peer, { transport: 'mtls', spiffeId: `spiffe://${TD}/operator/alice`, fingerprint256: op.fingerprint256 });
    const agent = adminPeer(asPeer((await issueAgentCert(ca, { instanceId: 'i-1' })).certPem), TD);
    assert.ok(!agent.ok && agent.error.code === 'identity.operator_required' && agent.error.httpStatus === 403);
    assert.match(agent.ok ? '' : agent.error.message, /agent identity/);
    const elsewhere = adminPeer(op, 'other.domain');
    assert.ok(!elsewhere.ok && /no SPIFFE ID of this trust domain/.test(elsewhere.error.message));
  });
});
