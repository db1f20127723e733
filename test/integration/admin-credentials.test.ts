/**
 * The admin listener in front of the credential routes: the role an operator certificate resolves
 * to is what the routes check (issue 17: a viewer is refused credentials.lease with 403
 * auth.permission_denied), and a roles file that breaks takes the permissions away (fail closed).
 */
import assert from 'node:assert/strict';
import { request } from 'node:https';
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

describe('admin listener and the credential routes', () => {
  let dir: string;
  let rolesPath: string;
  let server: ServerHandle;
  let ca: CaMaterial;
  const certs: Record<string, IssuedCert> = {};

  function post(
    path: string,
    cert: IssuedCert,
    body: unknown,
  ): Promise<{ status: number; json: { error?: { code: string; message: string } } }> {
    const text = JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: server.ports.admin,
          path,
          method: 'POST',
          ca: ca.caCertPem,
          cert: cert.certPem,
          key: cert.keyPem,
          agent: false,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
        },
        (res) => {
          let out = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (out += c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, json: JSON.parse(out) as { error?: { code: string; message: string } } }),
          );
        },
      );
      req.on('error', reject);
      req.end(text);
    });
  }

  const lease = { credential: 'nothing-here', agent_id: 'agent-1', instance_id: 'i-1', ttl_seconds: 60 };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-admin-creds-'));
    rolesPath = join(dir, 'roles.json');
    await writeFile(rolesPath, JSON.stringify({ alice: 'operator' }));
    const config = loopbackConfig(dir, { SVC_OPERATOR_ROLES: rolesPath });
    server = await startServer(config, pino({ level: 'silent' }), {
      components: [authComponent, eventsComponent(), credentialsComponent(), httpComponent, adminListenerComponent],
    });
    ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    certs['alice'] = await issueOperatorCert(ca, { name: 'alice' });
    certs['bob'] = await issueOperatorCert(ca, { name: 'bob' });
  });

  after(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  test('a viewer is refused credentials.lease with 403 auth.permission_denied naming it', async () => {
    const r = await post('/api/v2/credentials/leases', certs['bob']!, lease);
    assert.equal(r.status, 403);
    assert.equal(r.json.error?.code, 'auth.permission_denied');
    assert.match(r.json.error?.message ?? '', /credentials\.lease/);
  });

  test('an operator gets past the permission check (the unknown credential is what refuses it)', async () => {
    const r = await post('/api/v2/credentials/leases', certs['alice']!, lease);
    assert.notEqual(r.status, 403, JSON.stringify(r.json));
  });

  test('when the roles file breaks, the operator is refused too (fail closed)', async () => {
    await writeFile(rolesPath, '{ not json');
    const r = await post('/api/v2/credentials/leases', certs['alice']!, lease);
    assert.equal(r.status, 403);
    assert.equal(r.json.error?.code, 'auth.permission_denied');
    assert.match(r.json.error?.message ?? '', /unresolved identity/);
  });
});
