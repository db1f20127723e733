/**
 * The credential routes on the admin listener (real mutual TLS, certificates from the server's CA,
 * a real roles file): each route resolves its caller through the auth component's identity, so a
 * viewer is refused credentials.lease, an operator may lease but not register, and the audit
 * names the operator who acted.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { adminListenerComponent, authComponent } from '../../src/auth/component.js';
import { credentialsComponent } from '../../src/credentials/component.js';
import { eventsComponent } from '../../src/events/component.js';
import { ensureCa, issueOperatorCert, type CaMaterial, type IssuedCert } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { httpComponent } from '../../src/server/runtime-components.js';
import { loopbackConfig } from '../support/test-config.js';
import { mtlsRequest } from '../support/mtls-request.js';

void describe('credential routes over mutual TLS', () => {
  let dir: string;
  let server: ServerHandle;
  let ca: CaMaterial;
  const certs: Record<string, IssuedCert> = {};

  async function admin(
    method: string,
    path: string,
    cert: IssuedCert,
    body?: unknown,
  ): Promise<{ status: number; json: Record<string, unknown> }> {
    const r = await mtlsRequest({ port: server.ports.admin, ca: ca.caCertPem, cert: cert.certPem, key: cert.keyPem }, method, path, body);
    return { status: r.status, json: JSON.parse(r.text) as Record<string, unknown> };
  }
  const code = (r: { json: Record<string, unknown> }): string | undefined => (r.json['error'] as { code?: string } | undefined)?.code;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-cred-mtls-'));
    const rolesPath = join(dir, 'roles.json');
    await writeFile(rolesPath, JSON.stringify({ alice: 'admin', carol: 'operator' }));
    const config = loopbackConfig(dir, { SVC_OPERATOR_ROLES: rolesPath });
    server = await startServer(config, pino({ level: 'silent' }), {
      components: [authComponent, eventsComponent(), credentialsComponent(), httpComponent, adminListenerComponent],
    });
    ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    for (const name of ['alice', 'bob', 'carol']) certs[name] = await issueOperatorCert(ca, { name });
  });
  after(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  void test('admin registers, operator leases, viewer only reads; the lease and the audit name the operator', async () => {
    const alice = certs['alice'] as IssuedCert;
    const bob = certs['bob'] as IssuedCert;
    const carol = certs['carol'] as IssuedCert;
    const add = { name: 'git-token', value: 'ghp-0123456789abcdef' };
    const denied = await admin('POST', '/api/v2/credentials', carol, add);
    assert.equal(denied.status, 403);
    assert.equal(code(denied), 'auth.permission_denied');
    assert.equal((await admin('POST', '/api/v2/credentials', alice, add)).status, 201);

    const grant = { credential: 'git-token', agent_id: 'a', instance_id: 'i', ttl_seconds: 60 };
    const viewer = await admin('POST', '/api/v2/credentials/leases', bob, grant);
    assert.equal(viewer.status, 403);
    assert.equal(code(viewer), 'auth.permission_denied');
    assert.match(JSON.stringify(viewer.json), /credentials\.lease/);
    const proxied = await admin('POST', '/api/v2/credential-proxy/http', bob, {});
    assert.equal(code(proxied), 'auth.permission_denied');

    const lease = await admin('POST', '/api/v2/credentials/leases', carol, grant);
    assert.equal(lease.status, 201);
    assert.equal(lease.json['actor'], 'carol');
    assert.equal((await admin('GET', '/api/v2/credentials/leases', bob)).status, 200);
    assert.equal((await admin('DELETE', `/api/v2/credentials/leases/${lease.json['id'] as string}`, bob)).status, 403);

    const audit = await admin('GET', `/api/v2/credentials/audit?date=${new Date().toISOString().slice(0, 10)}`, bob);
    const actors = (audit.json['records'] as { action: string; actor: string }[]).map((r) => `${r.action}:${r.actor}`);
    assert.ok(actors.includes('lease.grant:carol') && actors.includes('credential.add:alice'), actors.join(' '));
  });
});
