/**
 * The agent's side of enrollment against a small consume server of the test's own (node:http)
 * whose certificates a real in-memory CA issues: 503s are retried until an answer comes, a
 * taxonomy refusal is an EnrollmentError with its code at once, and an answer that is not a
 * certificate for the agent's own key and instance is refused (bootstrap.response_invalid)
 * without writing anything. Material that is not usable never reaches the network.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import pino from 'pino';
import { enrolledBundle, EnrollmentError, enrollWithToken } from '../../../src/guest-agent/enroll.js';
import { createStandaloneCa, issueAgentCert, issueAgentCertForCsr, type CaMaterial } from '../../../src/identity/ca.js';
import { BOOTSTRAP_MATERIAL_SCHEMA, type BootstrapMaterial } from '../../../src/wire/bootstrap.js';
import { tempDir } from '../identity/helpers.js';

type Reply = (body: { token: string; csr: string }, res: ServerResponse) => Promise<void>;

async function consumeServer(t: TestContext, replies: Reply[]): Promise<{ url: string; calls: () => number }> {
  let calls = 0;
  const srv = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const reply = replies[Math.min(calls, replies.length - 1)];
      calls++;
      void reply?.(JSON.parse(Buffer.concat(chunks).toString()) as { token: string; csr: string }, res);
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  t.after(() => srv.close());
  const addr = srv.address();
  assert.ok(addr !== null && typeof addr === 'object');
  return { url: `http://127.0.0.1:${addr.port}/api/v1/bootstrap-enrollment/consume`, calls: () => calls };
}

function json(res: ServerResponse, status: number, body: unknown): Promise<void> {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
  return Promise.resolve();
}

const refuse =
  (status: number, code: string): Reply =>
  (_b, res) =>
    json(res, status, { error: { code, message: `refused: ${code}` } });

const issue =
  (ca: CaMaterial, instanceId: string): Reply =>
  async (b, res) => {
    const c = await issueAgentCertForCsr(ca, { instanceId, csrPem: b.csr });
    await json(res, 200, {
      certificate_pem: c.certPem,
      ca_pem: ca.caCertPem,
      spiffe_id: c.spiffeId,
      instance_id: instanceId,
      agent_id: 'agent-1',
      expires_at: c.notAfter.toISOString(),
    });
  };

async function material(
  t: TestContext,
  ca: CaMaterial,
  url: string,
  patch: Partial<BootstrapMaterial> = {},
): Promise<{ file: string; certs: string }> {
  const dir = await tempDir(t, 'sandboxd-enroll-');
  const m: BootstrapMaterial = {
    schema_version: BOOTSTRAP_MATERIAL_SCHEMA,
    token: 'T'.repeat(43),
    token_id: 'tok-1',
    consume_url: url,
    ca_pem: ca.caCertPem,
    trust_domain: 'sandbox.local',
    instance_id: 'inst-1',
    agent_id: 'agent-1',
    expires_at: new Date(Date.now() + 60_000).toISOString(),
    ...patch,
  };
  const file = join(dir, 'material.json');
  await writeFile(file, JSON.stringify(m), { mode: 0o600 });
  return { file, certs: join(dir, 'certs') };
}

const log = pino({ level: 'silent' });

test('503s are retried; the bundle and enrollment.json are written and the material deleted', async (t) => {
  const ca = await createStandaloneCa('sandbox.local');
  const srv = await consumeServer(t, [
    refuse(503, 'bootstrap.ca_unavailable'),
    refuse(503, 'bootstrap.ca_unavailable'),
    issue(ca, 'inst-1'),
  ]);
  const { file, certs } = await material(t, ca, srv.url);
  const r = await enrollWithToken({ materialFile: file, certsDir: certs, log, retryBaseMs: 10 });
  assert.equal(r.spiffeId, 'spiffe://sandbox.local/agent/inst-1');
  assert.equal(srv.calls(), 3);
  assert.ok(!existsSync(file));
  assert.equal((await stat(join(certs, 'agent-key.pem'))).mode & 0o777, 0o600);
  assert.equal((await stat(certs)).mode & 0o777, 0o700);
  const record = await enrolledBundle(certs);
  assert.equal(record?.instance_id, 'inst-1');
  assert.equal(record?.agent_id, 'agent-1');
  assert.ok(!(await readFile(join(certs, 'enrollment.json'), 'utf8')).includes('T'.repeat(43)));
});

test('a taxonomy refusal is an EnrollmentError with its code at once; nothing is written', async (t) => {
  const ca = await createStandaloneCa('sandbox.local');
  const srv = await consumeServer(t, [refuse(401, 'bootstrap.token_unknown')]);
  const { file, certs } = await material(t, ca, srv.url);
  await assert.rejects(enrollWithToken({ materialFile: file, certsDir: certs, log, retryBaseMs: 10 }), (err: unknown) => {
    assert.ok(err instanceof EnrollmentError);
    assert.equal(err.code, 'bootstrap.token_unknown');
    assert.equal(err.httpStatus, 401);
    return true;
  });
  assert.equal(srv.calls(), 1);
  assert.ok(existsSync(file) && !existsSync(certs));
});

test('an answer for another instance, another key or from another CA is refused', async (t) => {
  const ca = await createStandaloneCa('sandbox.local');
  const other = await createStandaloneCa('sandbox.local');
  const otherKey: Reply = async (_b, res) => {
    const c = await issueAgentCert(ca, { instanceId: 'inst-1' });
    await json(res, 200, { certificate_pem: c.certPem, ca_pem: ca.caCertPem, spiffe_id: c.spiffeId });
  };
  for (const reply of [issue(ca, 'inst-2'), otherKey, issue(other, 'inst-1')]) {
    const srv = await consumeServer(t, [reply]);
    const { file, certs } = await material(t, ca, srv.url);
    await assert.rejects(
      enrollWithToken({ materialFile: file, certsDir: certs, log }),
      (err: unknown) => err instanceof EnrollmentError && err.code === 'bootstrap.response_invalid',
    );
    assert.ok(!existsSync(certs));
  }
});

test('unusable material is refused before any call', async (t) => {
  const ca = await createStandaloneCa('sandbox.local');
  const srv = await consumeServer(t, [refuse(500, 'server.internal')]);
  for (const patch of [
    { schema_version: 'v0' },
    { token: 'short' },
    { instance_id: '../etc' },
    { consume_url: 'ftp://x' },
    { ca_pem: 'nope' },
    { expires_at: 'soon' },
  ] as Partial<BootstrapMaterial>[]) {
    const { file, certs } = await material(t, ca, srv.url, patch);
    await assert.rejects(
      enrollWithToken({ materialFile: file, certsDir: certs, log }),
      (err: unknown) =>
        err instanceof EnrollmentError && err.code === 'bootstrap.material_invalid' && !err.message.includes('T'.repeat(43)),
      JSON.stringify(patch),
    );
  }
  assert.equal(srv.calls(), 0);
});
