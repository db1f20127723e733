/**
 * Secure bootstrap enrollment on real parts (README "Secure bootstrap"): a real sandboxd (its CA,
 * SQLite token store, HTTP and admin listeners, mTLS gRPC listener, test-driver VMs with real
 * local sandbox-agent processes). The consume route is called over HTTP as an agent calls it:
 * one success, then each refusal of the taxonomy (consumed, expired, revoked, unknown, bad CSR,
 * bad body) with the token never echoed; concurrent consumes of one token → exactly one
 * certificate. A VM with staged material enrolls its agent with a fresh key and certificate, and
 * the raw token is on no process's command line meanwhile. The agent binary on its own (https,
 * refusals) is bootstrap-agent.test.ts.
 */
// @peculiar/x509 (otherKeyCsr) needs the reflect-metadata polyfill loaded before it.
import 'reflect-metadata';
import assert from 'node:assert/strict';
import { createHash, createPrivateKey, generateKeyPairSync, webcrypto, X509Certificate } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as x509 from '@peculiar/x509';
import Database from 'better-sqlite3';
import pino from 'pino';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { adminListenerComponent, authComponent } from '../../src/auth/component.js';
import { bootstrapComponent, BOOTSTRAP_DIR } from '../../src/bootstrap/component.js';
import { BOOTSTRAP_DB_FILE } from '../../src/bootstrap/token-store.js';
import { eventsComponent } from '../../src/events/component.js';
import { buildCsrPem } from '../../src/guest-agent/csr.js';
import { inject, type InjectResponse } from '../../src/http/inject.js';
import { ensureCa, issueOperatorCert, type CaMaterial } from '../../src/identity/ca.js';
// Sets @peculiar/x509's crypto provider (Node's WebCrypto) before otherKeyCsr uses the package.
import '../../src/identity/x509.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { actorsComponent, hypervisorComponent, httpComponent, jobsComponent } from '../../src/server/runtime-components.js';
import { vmsComponent } from '../../src/vms/component.js';
import { bootstrapMaterialPath, vmPaths } from '../../src/vms/vm-paths.js';
import type { BootstrapConsumeResponse, BootstrapMaterial, BootstrapReadiness } from '../../src/wire/bootstrap.js';
import { mtlsRequest } from '../support/mtls-request.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { uniqueName } from './vms-harness.js';

type Json = Record<string, unknown>;

/** A valid CSR over a key type sandboxd does not accept (made with @peculiar/x509 over WebCrypto). */
async function otherKeyCsr(
  keyAlg: webcrypto.RsaHashedKeyGenParams | webcrypto.EcKeyGenParams,
  signingAlgorithm: webcrypto.Algorithm | webcrypto.EcdsaParams = keyAlg,
): Promise<string> {
  const keys = await webcrypto.subtle.generateKey(keyAlg, true, ['sign', 'verify']);
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: 'CN=other',
    keys,
    signingAlgorithm,
  });
  return csr.toString('pem');
}

interface Answer {
  status: number;
  text: string;
  json: Json;
}

describe('secure bootstrap enrollment', () => {
  let dir: string;
  let server: ServerHandle;
  let ca: CaMaterial;
  const staged: BootstrapMaterial[] = [];
  /** Every line the server logged (level debug), to check no token reached a log. */
  const logLines: string[] = [];

  const bootstrap = () => server.service('bootstrap');
  const req = (method: string, url: string, body?: unknown): Promise<InjectResponse> =>
    inject(server.router, { method, url, ...(body !== undefined ? { body } : {}) });

  async function consumeRaw(body: string, contentType = 'application/json'): Promise<Answer> {
    const res = await fetch(`http://127.0.0.1:${server.ports.http}/api/v1/bootstrap-enrollment/consume`, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body,
    });
    const text = await res.text();
    return { status: res.status, text, json: JSON.parse(text) as Json };
  }
  const consume = (token: string, csr: string) => consumeRaw(JSON.stringify({ token, csr }));

  function newCsr(instanceId = 'x'): { csr: string; keyPem: string } {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    return { csr: buildCsrPem(privateKey, `agent-${instanceId}`), keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
  }

  async function stage(instanceId: string, ttlSeconds?: number): Promise<BootstrapMaterial> {
    const file = join(dir, 'staged', instanceId, 'material.json');
    await bootstrap().stage({ instanceId, agentId: `agent-${instanceId}`, file, ...(ttlSeconds !== undefined && { ttlSeconds }) });
    const m = JSON.parse(await readFile(file, 'utf8')) as BootstrapMaterial;
    staged.push(m);
    return m;
  }

  function codeOf(a: Answer): string {
    return String((a.json['error'] as Json | undefined)?.['code']);
  }

  /** No answer may carry a raw token or its hash. */
  function assertNoSecrets(text: string): void {
    for (const m of staged) {
      assert.ok(!text.includes(m.token), 'an answer echoed a raw token');
      const hash = createHash('sha256').update(m.token).digest();
      for (const enc of ['hex', 'base64', 'base64url'] as const)
        assert.ok(!text.includes(hash.toString(enc)), `an answer holds a token hash (${enc})`);
    }
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-bootstrap-'));
    const config = loopbackConfig(dir, {
      SVC_ACTORS: 'workers',
      SVC_ACTOR_SHARDS: '1',
      SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000',
      SVC_HYPERVISOR_READ_BUDGET_MS: '20000',
    });
    const logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });
    server = await startServer(config, logger, {
      components: [
        authComponent,
        eventsComponent(),
        actorsComponent,
        agentsComponent,
        jobsComponent,
        hypervisorComponent,
        httpComponent,
        adminListenerComponent,
        bootstrapComponent(),
        agentListenerComponent,
        vmsComponent({ agentConnectTimeoutMs: 90_000 }),
      ],
    });
    ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
  });

  after(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('stage writes 0600 material (dir 0700) and answers only the token id and expiry', async () => {
    const file = join(dir, 'staged', 'inst-stage', 'material.json');
    const res = await bootstrap().stage({ instanceId: 'inst-stage', agentId: 'agent-stage', file });
    assert.deepEqual(Object.keys(res).sort(), ['expiresAt', 'tokenId']);
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.equal((await stat(join(dir, 'staged', 'inst-stage'))).mode & 0o777, 0o700);
    const m = JSON.parse(await readFile(file, 'utf8')) as BootstrapMaterial;
    staged.push(m);
    assert.equal(m.token_id, res.tokenId);
    assert.equal(m.expires_at, res.expiresAt);
    assert.match(m.token, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(m.consume_url, `http://127.0.0.1:${server.ports.http}/api/v1/bootstrap-enrollment/consume`);
    assert.equal(m.ca_pem, ca.caCertPem);
    assert.equal(m.instance_id, 'inst-stage');
    assert.equal(m.agent_id, 'agent-stage');
    const ttlMs = Date.parse(m.expires_at) - Date.now();
    assert.ok(ttlMs > 14 * 60_000 && ttlMs <= 15 * 60_000, `default TTL is 15 minutes (${ttlMs} ms left)`);
    // The store keeps the hash only: the raw token is nowhere in its files.
    const db = await readdir(join(dir, BOOTSTRAP_DIR));
    for (const f of db) assert.ok(!(await readFile(join(dir, BOOTSTRAP_DIR, f))).includes(m.token), `${f} holds the raw token`);
  });

  test('consume: a certificate for the CSR key and the instance SPIFFE id, then bootstrap.token_consumed', async () => {
    const m = await stage('inst-ok');
    const { csr, keyPem } = newCsr('inst-ok');
    const a = await consume(m.token, csr);
    assert.equal(a.status, 200, a.text);
    const r = a.json as unknown as BootstrapConsumeResponse;
    assert.equal(r.spiffe_id, 'spiffe://sandbox.local/agent/inst-ok');
    assert.equal(r.instance_id, 'inst-ok');
    assert.equal(r.agent_id, 'agent-inst-ok');
    assert.equal(r.ca_pem, ca.caCertPem);
    const cert = new X509Certificate(r.certificate_pem);
    assert.ok(cert.verify(new X509Certificate(ca.caCertPem).publicKey), 'signed by the CA');
    assert.ok(cert.checkPrivateKey(createPrivateKey(keyPem)), "for the agent's own key");
    assert.equal(cert.subjectAltName, 'URI:spiffe://sandbox.local/agent/inst-ok');
    assert.equal(new Date(cert.validTo).toISOString(), r.expires_at);

    const again = await consume(m.token, newCsr().csr);
    assert.equal(again.status, 409, again.text);
    assert.equal(codeOf(again), 'bootstrap.token_consumed');
    assertNoSecrets(again.text);
  });

  test('unknown, expired, revoked tokens and bad bodies get their taxonomy codes; the token is never echoed', async () => {
    const { csr } = newCsr();
    const unknown = await consume('A'.repeat(43), csr);
    assert.equal(unknown.status, 401);
    assert.equal(codeOf(unknown), 'bootstrap.token_unknown');

    const exp = await stage('inst-expired');
    const db = new Database(join(dir, BOOTSTRAP_DIR, BOOTSTRAP_DB_FILE));
    try {
      db.prepare('UPDATE tokens SET expires_at_ms = ? WHERE token_id = ?').run(Date.now() - 1000, exp.token_id);
    } finally {
      db.close();
    }
    const expired = await consume(exp.token, csr);
    assert.equal(expired.status, 401, expired.text);
    assert.equal(codeOf(expired), 'bootstrap.token_expired');

    const rev = await stage('inst-revoked');
    const file = join(dir, 'staged', 'inst-revoked', 'material.json');
    assert.equal(bootstrap().revokeInstance('inst-revoked'), 1);
    assert.equal(bootstrap().revokeInstance('inst-revoked'), 0, 'nothing left to revoke');
    await waitFor('the revoked material file to be removed', () => !existsSync(file), { deadlineMs: DEADLINE_MS.local });
    const revoked = await consume(rev.token, csr);
    assert.equal(revoked.status, 401, revoked.text);
    assert.equal(codeOf(revoked), 'bootstrap.token_revoked');

    // Staging again for an instance supersedes its earlier token.
    const first = await stage('inst-twice');
    const second = await stage('inst-twice');
    assert.equal(codeOf(await consume(first.token, csr)), 'bootstrap.token_revoked');
    assert.equal((await consume(second.token, newCsr().csr)).status, 200);

    const live = await stage('inst-bodies');
    const half = `{"token": "${live.token}", "csr": `;
    for (const [body, type] of [
      [half, 'application/json'],
      [`{"token": "${live.token}"}`, 'application/json'],
      [`["${live.token}"]`, 'application/json'],
      [JSON.stringify({ token: live.token, csr: 42 }), 'application/json'],
      [JSON.stringify({ token: live.token, csr }), 'text/plain'],
    ] as const) {
      const a = await consumeRaw(body, type);
      if (type === 'text/plain') {
        // The content type is not what the taxonomy judges: the body is still read.
        assert.equal(a.status, 200, a.text);
        continue;
      }
      assert.equal(a.status, 400, a.text);
      assert.equal(codeOf(a), 'bootstrap.request_invalid');
      assertNoSecrets(a.text);
    }
    const big = await consumeRaw(JSON.stringify({ token: 'x', csr: 'y'.repeat(20_000) }));
    assert.equal(big.status, 413);
    for (const a of [unknown, expired, revoked]) assertNoSecrets(a.text);
  });

  test('bad CSRs are bootstrap.csr_invalid and leave the token usable', async () => {
    const m = await stage('inst-csr');
    const good = newCsr('inst-csr').csr;
    const tampered = good.replace(/([A-Za-z])(?=[^\n]*\n-----END)/, (c) => (c === 'A' ? 'B' : 'A'));
    const notDer = `-----BEGIN CERTIFICATE REQUEST-----\n${Buffer.from('not der').toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    const rsa = await otherKeyCsr({
      name: 'RSASSA-PKCS1-v1_5',
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: 'SHA-256',
    });
    const p384 = await otherKeyCsr({ name: 'ECDSA', namedCurve: 'P-384' }, { name: 'ECDSA', hash: 'SHA-384' });
    for (const csr of ['garbage', tampered, notDer, rsa, p384, `${good}${good}`, ca.caCertPem]) {
      const a = await consume(m.token, csr);
      assert.equal(a.status, 400, a.text);
      assert.equal(codeOf(a), 'bootstrap.csr_invalid');
      assertNoSecrets(a.text);
    }
    const ok = await consume(m.token, good);
    assert.equal(ok.status, 200, ok.text);
  });

  test('concurrent consumes of one token: exactly one certificate', async () => {
    const m = await stage('inst-race');
    const answers = await Promise.all(Array.from({ length: 8 }, () => consume(m.token, newCsr('inst-race').csr)));
    const ok = answers.filter((a) => a.status === 200);
    assert.equal(ok.length, 1, answers.map((a) => `${a.status} ${codeOf(a)}`).join(', '));
    for (const a of answers.filter((x) => x.status !== 200)) assert.equal(codeOf(a), 'bootstrap.token_consumed');
  });

  test('a VM with staged material: its agent enrolls with its own key, connects, and the token is on no command line', async () => {
    const name = uniqueName('boot');
    const created = await req('POST', '/api/v1/vms', { name, vcpus: 1, memory_mb: 256 });
    assert.equal(created.status, 202, created.text);
    const opId = String((created.json() as { operation: Json }).operation['id']);
    await waitFor(
      'the create operation',
      async () => ((await req('GET', `/api/v1/operations/${opId}`)).json() as Json)['status'] === 'completed',
      {
        deadlineMs: DEADLINE_MS.agent,
        intervalMs: 100,
        lastState: async () => (await req('GET', `/api/v1/operations/${opId}`)).text,
      },
    );
    const instanceId = String(((await req('GET', `/api/v1/vms/${name}`)).json() as Json)['uuid']);
    const paths = vmPaths(dir, name);
    const oldSerial = new X509Certificate(await readFile(join(paths.certs, 'agent.pem'))).serialNumber;

    // Power off, forget the pre-issued certificate, stage material: the next start enrolls.
    assert.equal((await req('POST', `/api/v1/vms/${name}/stop`)).status, 200);
    const firstConnect = server.agents.registry.get(name)?.connected_at ?? 0;
    await rm(paths.certs, { recursive: true, force: true });
    const file = bootstrapMaterialPath(paths.dir);
    await bootstrap().stage({ instanceId, agentId: name, file });
    const m = JSON.parse(await readFile(file, 'utf8')) as BootstrapMaterial;
    staged.push(m);
    const consumedBefore = bootstrap().counts().consumed;

    // Watch every process's command line until the agent is connected.
    let scanning = true;
    let scans = 0;
    const leaks: string[] = [];
    const scanner = (async () => {
      while (scanning) {
        for (const pid of await readdir('/proc').catch(() => [] as string[])) {
          if (!/^\d+$/.test(pid)) continue;
          const cmd = await readFile(`/proc/${pid}/cmdline`).catch(() => null);
          if (cmd?.includes(m.token) === true) leaks.push(`${pid}: ${cmd.toString().replaceAll('\0', ' ')}`);
        }
        scans++;
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const start = req('POST', `/api/v1/vms/${name}/start`);
    const argv = await waitFor('the local agent to start', () => server.vms.localAgents.info(name)?.argv, {
      deadlineMs: DEADLINE_MS.process,
    });
    assert.ok(argv.includes('--bootstrap-token-file') && argv.includes(file), argv.join(' '));
    assert.equal((await start).status, 200);
    await waitFor(
      'the enrolled agent to connect',
      () => {
        const a = server.agents.registry.get(name);
        return a !== undefined && a.status !== 'Disconnected' && a.connected_at > firstConnect && a.instance_id === instanceId;
      },
      { deadlineMs: DEADLINE_MS.agent, intervalMs: 50, lastState: async () => readFile(paths.agentLog, 'utf8').catch(() => '') },
    );
    scanning = false;
    await scanner;
    assert.ok(scans > 0);
    assert.deepEqual(leaks, [], 'the raw token appeared on a command line');

    const cert = new X509Certificate(await readFile(join(paths.certs, 'agent.pem')));
    assert.equal(cert.subjectAltName, `URI:spiffe://sandbox.local/agent/${instanceId}`);
    assert.notEqual(cert.serialNumber, oldSerial, 'a fresh certificate');
    assert.equal((await stat(join(paths.certs, 'agent-key.pem'))).mode & 0o777, 0o600);
    assert.equal((await stat(paths.certs)).mode & 0o777, 0o700);
    assert.ok(cert.checkPrivateKey(createPrivateKey(await readFile(join(paths.certs, 'agent-key.pem')))));
    assert.ok(!existsSync(file), 'the material file is deleted once consumed');
    assert.equal(bootstrap().counts().consumed, consumedBefore + 1);
    const log = await readFile(paths.agentLog, 'utf8');
    assert.ok(!log.includes(m.token), 'the agent log holds the token');
    assert.match(log, /enrolled: certificate written/);

    assert.equal((await req('DELETE', `/api/v1/vms/${name}?force=true&delete_disk=true`)).status, 200);
  });

  test('readiness: secure posture with counts and the taxonomy, and nothing secret or a path (scanner)', async () => {
    const r = await req('GET', '/api/v2/admin/bootstrap/readiness');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers['cache-control'], 'no-store');
    const body = r.json() as BootstrapReadiness;
    assert.equal(body.status, 'secure');
    assert.deepEqual(body.reasons, []);
    assert.equal(body.grpc_ca_backend_configured, true);
    assert.equal(body.ca_backend_class, 'local-file-ca');
    assert.equal(body.trust_domain, 'sandbox.local');
    assert.equal(body.trust_bundle.ca_not_after, ca.caNotAfter.toISOString());
    assert.equal(body.trust_bundle.fresh, true);
    assert.ok(body.trust_bundle.seconds_to_expiry !== null && body.trust_bundle.seconds_to_expiry > 86_400 * 3000);
    const counts = bootstrap().counts();
    assert.deepEqual(
      {
        active: body.token_store.active,
        consumed: body.token_store.consumed,
        expired: body.token_store.expired,
        revoked: body.token_store.revoked,
      },
      counts,
    );
    assert.ok(counts.consumed >= 5 && counts.revoked >= 2 && counts.expired >= 1 && counts.active >= 1, JSON.stringify(counts));
    assert.equal(body.token_store.issued, counts.active + counts.consumed + counts.expired + counts.revoked);
    const codes = body.error_taxonomy.map((e) => e.code);
    for (const c of [
      'bootstrap.token_unknown',
      'bootstrap.token_consumed',
      'bootstrap.token_expired',
      'bootstrap.token_revoked',
      'bootstrap.csr_invalid',
      'bootstrap.ca_unavailable',
    ])
      assert.ok(codes.includes(c), c);

    // Over the admin listener with an operator certificate (viewer: admin.read) it is the same document.
    const op = await issueOperatorCert(ca, { name: 'reader' });
    const viaAdmin = await mtlsRequest(
      { port: server.ports.admin, ca: ca.caCertPem, cert: op.certPem, key: op.keyPem },
      'GET',
      '/api/v2/admin/bootstrap/readiness',
    );
    assert.equal(viaAdmin.status, 200, viaAdmin.text);

    for (const text of [r.text, viaAdmin.text]) {
      assert.ok(!text.includes('-----BEGIN'), 'PEM');
      const caBody = ca.caCertPem.split('\n').filter((l) => l !== '' && !l.startsWith('-----'));
      for (const line of caBody) assert.ok(!text.includes(line), 'a line of the CA certificate body');
      assert.ok(!text.includes(op.keyPem.split('\n')[1] ?? '-'), 'an operator key');
      assertNoSecrets(text);
      for (const p of [dir, server.config.secretsDir, server.config.stateDir, tmpdir()]) assert.ok(!text.includes(p), `a path: ${p}`);
      assert.ok(!/"\/(?!api\/)[^"]*"/.test(text), 'a string that is a filesystem path');
      assert.ok(!/ca\.pem|key\.pem|bootstrap\.db|material\.json/.test(text), 'a file name');
    }

    const metrics = await server.metrics.registry.metrics();
    assert.match(metrics, /svc_bootstrap_tokens_consumed_total [1-9]/);
    assert.match(metrics, /svc_bootstrap_consume_refused_total\{code="bootstrap.token_consumed"\} [1-9]/);
    assert.match(metrics, /svc_bootstrap_tokens\{state="active"\} \d+/);
    assertNoSecrets(metrics);

    // The server's own log names tokens by id only.
    const log = logLines.join('');
    assert.match(log, /bootstrap token consumed/);
    assert.match(log, /bootstrap consume refused: bad CSR/);
    assertNoSecrets(log);
  });
});
