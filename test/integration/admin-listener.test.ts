/**
 * The admin listener (SVC_ADMIN_ADDR): HTTPS with mutual TLS on 127.0.0.1, real certificates from
 * the server's CA, a real roles file. Who gets in (an operator certificate of our CA, valid now),
 * who does not (no certificate, another CA, an expired certificate: refused by TLS; an agent's
 * certificate: 403 before any handler), what roles they get (GET /api/v2/credentials/authority),
 * and that the same routes answer there as on the loopback listener: JSON with a body, SSE, errors.
 */
import assert from 'node:assert/strict';
import { request } from 'node:https';
import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { adminListenerComponent, authComponent } from '../../src/auth/component.js';
import { ROLE_PERMISSIONS } from '../../src/auth/permissions.js';
import { eventsComponent } from '../../src/events/component.js';
import {
  createStandaloneCa,
  ensureCa,
  issueAgentCert,
  issueOperatorCert,
  type CaMaterial,
  type IssuedCert,
} from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { httpComponent } from '../../src/server/runtime-components.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

const COMPONENTS = [authComponent, eventsComponent(), httpComponent, adminListenerComponent];

describe('admin listener (HTTPS, mutual TLS)', () => {
  let dir: string;
  let rolesPath: string;
  let server: ServerHandle;
  let ca: CaMaterial;
  const logLines: string[] = [];
  const certs: Record<string, IssuedCert> = {};

  /** One request on a fresh connection to the admin listener, with `cert` as the client certificate (none when undefined). */
  function admin(
    path: string,
    cert: IssuedCert | undefined,
    opts: { method?: string; body?: string; trust?: string } = {},
  ): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: server.ports.admin,
          path,
          method: opts.method ?? 'GET',
          ca: opts.trust ?? ca.caCertPem,
          ...(cert !== undefined && { cert: cert.certPem, key: cert.keyPem }),
          agent: false,
          headers: opts.body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(opts.body) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(opts.body);
    });
  }

  const authority = async (cert: IssuedCert): Promise<Record<string, unknown>> => {
    const r = await admin('/api/v2/credentials/authority', cert);
    assert.equal(r.status, 200, r.text);
    return JSON.parse(r.text) as Record<string, unknown>;
  };

  /** What a client sees when TLS refuses it: an alert from the server, or the connection reset after it. */
  const TLS_REFUSED = /alert|ECONNRESET|socket hang up|EPIPE/i;

  const eventCount = (): number => server.events.query({ limit: 5000 }).events.length;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-admin-'));
    rolesPath = join(dir, 'roles.json');
    await writeFile(rolesPath, JSON.stringify({ alice: 'admin', 'ci-bot': 'operator' }));
    const config = loopbackConfig(dir, { SVC_OPERATOR_ROLES: rolesPath, SVC_LOCAL_ROLE: 'operator' });
    const logger = pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) });
    server = await startServer(config, logger, { components: COMPONENTS });
    ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    certs['alice'] = await issueOperatorCert(ca, { name: 'alice' });
    certs['bob'] = await issueOperatorCert(ca, { name: 'bob' });
    certs['ci-bot'] = await issueOperatorCert(ca, { name: 'ci-bot' });
    certs['agent'] = await issueAgentCert(ca, { instanceId: 'i-admin-test' });
    certs['expired'] = await issueOperatorCert(ca, { name: 'alice', ttlSeconds: 3600, now: new Date(Date.now() - 2 * 86_400_000) });
    const foreign = await createStandaloneCa(config.trustDomain);
    certs['foreign'] = await issueOperatorCert(foreign, { name: 'alice' });
  });

  after(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  test('it listens on its own port, beside the loopback listener', () => {
    assert.ok(server.ports.admin > 0);
    assert.notEqual(server.ports.admin, server.ports.http);
  });

  const event = JSON.stringify({ event_type: 'test.admin_listener', details: { n: 1 } });

  test('without a client certificate the TLS handshake is refused and no handler runs', async () => {
    const before = eventCount();
    await assert.rejects(admin('/api/v1/events', undefined, { method: 'POST', body: event }), TLS_REFUSED);
    assert.equal(eventCount(), before);
  });

  test('a certificate from another CA is refused by TLS', async () => {
    const before = eventCount();
    await assert.rejects(admin('/api/v1/events', certs['foreign'], { method: 'POST', body: event }), TLS_REFUSED);
    assert.equal(eventCount(), before);
  });

  test('an expired operator certificate is refused by TLS', async () => {
    assert.ok(certs['expired']!.notAfter.getTime() < Date.now());
    const before = eventCount();
    await assert.rejects(admin('/api/v1/events', certs['expired'], { method: 'POST', body: event }), TLS_REFUSED);
    assert.equal(eventCount(), before);
  });

  test("an agent's certificate is verified but refused with 403 identity.operator_required before any handler", async () => {
    const before = eventCount();
    const r = await admin('/api/v1/events', certs['agent'], { method: 'POST', body: event });
    assert.equal(r.status, 403);
    const body = JSON.parse(r.text) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'identity.operator_required');
    assert.match(body.error.message, /agent identity/);
    assert.equal(eventCount(), before);
    assert.equal((await admin('/api/v2/credentials/authority', certs['agent'])).status, 403);
  });

  test('alice (admin in the roles file) gets the admin permissions and an SSH identity', async () => {
    const who = await authority(certs['alice']!);
    assert.deepEqual(who, {
      schema_version: 'management.access-authority/v1',
      mode: 'mtls',
      actor: 'alice',
      role: 'admin',
      permissions: [...ROLE_PERMISSIONS.admin],
      ssh_identity: true,
      fail_closed: false,
    });
  });

  test('bob (not in the roles file) is a viewer; ci-bot an operator', async () => {
    const bob = await authority(certs['bob']!);
    assert.equal(bob['actor'], 'bob');
    assert.equal(bob['role'], 'viewer');
    assert.deepEqual(bob['permissions'], [...ROLE_PERMISSIONS.viewer]);
    assert.ok(!(bob['permissions'] as string[]).includes('credentials.lease'));
    const bot = await authority(certs['ci-bot']!);
    assert.equal(bot['role'], 'operator');
  });

  test('the loopback listener answers actor local with SVC_LOCAL_ROLE and no SSH identity; headers claim nothing', async () => {
    const res = await fetch(`http://127.0.0.1:${server.ports.http}/api/v2/credentials/authority`, {
      headers: { 'x-svc-actor': 'alice', 'x-ssl-client-s-dn': 'CN=operator-alice' },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const who = (await res.json()) as Record<string, unknown>;
    assert.equal(who['mode'], 'local');
    assert.equal(who['actor'], 'local');
    assert.equal(who['role'], 'operator');
    assert.deepEqual(who['permissions'], [...ROLE_PERMISSIONS.operator]);
    assert.equal(who['ssh_identity'], false);
    assert.equal(who['fail_closed'], false);
  });

  test('the same routes answer on the admin listener: a JSON body, a list, route errors with the v1 envelope', async () => {
    const posted = await admin('/api/v1/events', certs['bob'], { method: 'POST', body: event });
    assert.ok(posted.status >= 200 && posted.status < 300, posted.text);
    const list = await admin('/api/v1/events?event_type=test.admin_listener', certs['bob']);
    assert.equal(list.status, 200);
    assert.ok((JSON.parse(list.text) as { events: unknown[] }).events.length >= 1);
    const missing = await admin('/api/v1/nope', certs['bob']);
    assert.equal(missing.status, 404);
    assert.equal((JSON.parse(missing.text) as { error: { code: string } }).error.code, 'route.not_found');
    const malformed = await admin('/api/v1/events', certs['bob'], { method: 'POST', body: '{"event_type":' });
    assert.equal(malformed.status, 400);
    assert.equal((JSON.parse(malformed.text) as { error: { code: string } }).error.code, 'request.malformed_json');
    const tooBig = await admin('/api/v1/events', certs['bob'], { method: 'POST', body: `{"x":"${'a'.repeat(2 * 1024 * 1024)}"}` });
    assert.equal(tooBig.status, 413);
    const wrongMethod = await admin('/api/v2/credentials/authority', certs['bob'], { method: 'DELETE' });
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers['allow'], 'GET, HEAD');
    const head = await admin('/api/v2/credentials/authority', certs['bob'], { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.text, '');
  });

  test('SSE streams on the admin listener: a follower sees an event posted on the loopback listener', async () => {
    const frames: string[] = [];
    let close: () => void = () => undefined;
    const opened = new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: server.ports.admin,
          path: '/api/v1/events?follow=true&event_type=test.sse_admin',
          ca: ca.caCertPem,
          cert: certs['bob']!.certPem,
          key: certs['bob']!.keyPem,
          agent: false,
        },
        (res) => {
          res.setEncoding('utf8');
          res.on('data', (c: string) => frames.push(c));
          close = () => res.destroy();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end();
    });
    assert.equal(await opened, 200);
    try {
      await waitFor('the SSE stream to open', () => frames.join('').includes(': connected'), { deadlineMs: DEADLINE_MS.local });
      const res = await fetch(`http://127.0.0.1:${server.ports.http}/api/v1/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ event_type: 'test.sse_admin', details: { via: 'loopback' } }),
      });
      assert.ok(res.ok);
      await waitFor('the event on the admin SSE stream', () => frames.join('').includes('"test.sse_admin"'), {
        deadlineMs: DEADLINE_MS.local,
        lastState: () => frames.join(''),
      });
    } finally {
      close();
    }
  });

  test('a roles file that becomes invalid or unreadable makes mTLS callers fail closed, and fixing it restores them', async () => {
    await writeFile(rolesPath, '{"alice": "admin", "zz-canary-name": "superuser"}');
    let who = await authority(certs['alice']!);
    assert.equal(who['fail_closed'], true);
    assert.equal(who['role'], null);
    assert.deepEqual(who['permissions'], []);
    assert.equal(who['ssh_identity'], false);
    assert.match(String(who['reason']), /role is not one of viewer, operator, admin/);

    await writeFile(rolesPath, '{"alice": "admin", zz-canary-json');
    who = await authority(certs['alice']!);
    assert.equal(who['fail_closed'], true);
    assert.match(String(who['reason']), /not valid JSON/);
    assert.doesNotMatch(String(who['reason']), /canary/);
    // Asked again while unchanged: the same answer, and still one log line for this change.
    await authority(certs['alice']!);

    await unlink(rolesPath);
    who = await authority(certs['alice']!);
    assert.equal(who['fail_closed'], true);
    assert.match(String(who['reason']), /cannot be read \(ENOENT\)/);
    // The trusted local listener does not depend on the file.
    const local = (await (await fetch(`http://127.0.0.1:${server.ports.http}/api/v2/credentials/authority`)).json()) as Record<
      string,
      unknown
    >;
    assert.equal(local['fail_closed'], false);

    await writeFile(rolesPath, JSON.stringify({ alice: 'operator' }));
    who = await authority(certs['alice']!);
    assert.equal(who['fail_closed'], false);
    assert.equal(who['role'], 'operator');

    const logs = logLines.join('');
    assert.doesNotMatch(logs, /canary/, 'the roles file content is never logged');
    const unusable = logLines.filter((l) => l.includes('operator roles file cannot be used'));
    assert.equal(unusable.length, 3, unusable.join(''));
  });
});

describe('admin listener configuration', () => {
  test('SVC_ADMIN_ADDR=off starts no admin listener', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-admin-off-'));
    try {
      const server = await startServer(loopbackConfig(dir, { SVC_ADMIN_ADDR: 'off' }), pino({ level: 'silent' }), {
        components: COMPONENTS,
      });
      try {
        assert.equal(server.ports.admin, 0);
        assert.equal(server.find('adminListener'), undefined);
        assert.equal(server.readiness.state().ready, true);
      } finally {
        await server.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('stopping the server ends open SSE streams on the admin listener and closes its port; stop is idempotent', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-admin-stop-'));
    try {
      const config = loopbackConfig(dir);
      const server = await startServer(config, pino({ level: 'silent' }), { components: COMPONENTS });
      const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
      const op = await issueOperatorCert(ca, { name: 'carol' });
      const port = server.ports.admin;
      const tls = { host: '127.0.0.1', port, ca: ca.caCertPem, cert: op.certPem, key: op.keyPem, agent: false } as const;
      const ended = new Promise<string>((resolve, reject) => {
        const req = request({ ...tls, path: '/api/v1/events?follow=true' }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve(text));
          res.on('error', () => resolve(text));
        });
        req.on('error', reject);
        req.end();
      });
      await waitFor('the stream to be open', () => server.find('adminListener')?.openStreams() === 1, { deadlineMs: DEADLINE_MS.local });
      await Promise.all([server.stop(), server.stop()]);
      assert.match(await ended, /: connected/);
      await assert.rejects(
        new Promise((resolve, reject) => {
          const req = request({ ...tls, path: '/healthz' }, resolve);
          req.on('error', reject);
          req.end();
        }),
        /ECONNREFUSED/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('an invalid SVC_OPERATOR_ROLES file is a start-up error naming the variable, without its content', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-admin-bad-'));
    try {
      const roles = join(dir, 'roles.json');
      await writeFile(roles, '{"zz-canary": "root"}');
      await assert.rejects(
        startServer(loopbackConfig(dir, { SVC_OPERATOR_ROLES: roles }), pino({ level: 'silent' }), { components: COMPONENTS }),
        (err: Error) => {
          assert.match(err.message, /^SVC_OPERATOR_ROLES=.*roles\.json: entry 1 of the roles file: the role is not one of/);
          assert.doesNotMatch(err.message, /canary|root/);
          return true;
        },
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
