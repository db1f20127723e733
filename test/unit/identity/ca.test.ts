/**
 * The built-in CA on disk: what the first start creates (and with which modes), reuse, server
 * certificate renewal, refusals, and that what it issues verifies with the openssl CLI.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmod, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import {
  createStandaloneCa,
  ensureCa,
  issueAgentCert,
  SERVER_CERT_TTL_SECONDS,
  writeAgentBundle,
  writeOperatorBundle,
} from '../../../src/identity/ca.js';
import { modeOf, openssl, tempDir } from './helpers.js';

const TD = 'sandbox.local';
const DAY_MS = 86_400_000;

async function readAll(dir: string, names: string[]): Promise<string[]> {
  return Promise.all(names.map((n) => readFile(join(dir, n), 'utf8')));
}

void describe('ensureCa', () => {
  void test('first start creates ca.pem, ca-key.pem, server.pem, server-key.pem with private modes', async (t) => {
    const secrets = join(await tempDir(t), 'secrets');
    const ca = await ensureCa({ secretsDir: secrets, trustDomain: TD });
    assert.deepEqual(ca.created, { ca: true, server: true });
    assert.deepEqual((await readdir(secrets)).sort(), ['ca-key.pem', 'ca.pem', 'server-key.pem', 'server.pem']);
    assert.equal(await modeOf(secrets), '0700');
    assert.equal(await modeOf(join(secrets, 'ca-key.pem')), '0600');
    assert.equal(await modeOf(join(secrets, 'server-key.pem')), '0600');
    assert.equal(await modeOf(join(secrets, 'ca.pem')), '0644');
    assert.equal(await readFile(join(secrets, 'ca.pem'), 'utf8'), ca.caCertPem);

    const caCert = new X509Certificate(ca.caCertPem);
    assert.equal(caCert.ca, true);
    const caYears = (Date.parse(caCert.validTo) - Date.now()) / (365 * DAY_MS);
    assert.ok(caYears > 9.9 && caYears < 10.1, `CA valid ~10 years, got ${caYears}`);

    const verify = await openssl(['verify', '-CAfile', 'ca.pem', 'server.pem'], secrets);
    assert.equal(verify.code, 0, verify.out);
    const ext = await openssl(['x509', '-in', 'server.pem', '-noout', '-ext', 'subjectAltName,extendedKeyUsage'], secrets);
    for (const want of [
      'DNS:localhost',
      'IP Address:127.0.0.1',
      'IP Address:0:0:0:0:0:0:0:1',
      'URI:spiffe://sandbox.local/server',
      'TLS Web Server Authentication',
    ]) {
      assert.ok(ext.out.includes(want), `server.pem lacks ${want}:\n${ext.out}`);
    }
    const serverDays = (ca.serverNotAfter.getTime() - Date.now()) / DAY_MS;
    assert.ok(serverDays > 89.9 && serverDays <= 90, `server cert valid 90 days, got ${serverDays}`);
  });

  void test('a later start reuses everything byte for byte', async (t) => {
    const secrets = await tempDir(t);
    const names = ['ca.pem', 'ca-key.pem', 'server.pem', 'server-key.pem'];
    const first = await ensureCa({ secretsDir: secrets, trustDomain: TD });
    const before = await readAll(secrets, names);
    const second = await ensureCa({ secretsDir: secrets, trustDomain: TD });
    assert.deepEqual(second.created, { ca: false, server: false });
    assert.deepEqual(await readAll(secrets, names), before);
    assert.equal(second.caCertPem, first.caCertPem);
    assert.equal(second.serverKeyPem, first.serverKeyPem);
  });

  void test('concurrent first starts agree on one CA', async (t) => {
    const secrets = await tempDir(t);
    const all = await Promise.all([1, 2, 3, 4].map(() => ensureCa({ secretsDir: secrets, trustDomain: TD })));
    const onDisk = await readFile(join(secrets, 'ca.pem'), 'utf8');
    for (const ca of all) assert.equal(ca.caCertPem, onDisk);
    assert.equal(all.filter((ca) => ca.created.ca).length, 1);
    assert.ok(!(await readdir(secrets)).some((n) => n.endsWith('.tmp') || n.endsWith('.lock')), 'no temp or lock files left');
  });

  void test('a lock left by a crashed process does not block the next start', async (t) => {
    const secrets = await tempDir(t);
    const dead = spawnSync(process.execPath, ['-e', '']).pid; // exited: its pid is free
    await writeFile(join(secrets, '.ca.lock'), String(dead));
    const ca = await ensureCa({ secretsDir: secrets, trustDomain: TD });
    assert.equal(ca.created.ca, true);
    assert.ok(!(await readdir(secrets)).includes('.ca.lock'));
  });

  void test('the server certificate is renewed when it expires within 7 days; the CA is kept', async (t) => {
    const secrets = await tempDir(t);
    const old = await ensureCa({ secretsDir: secrets, trustDomain: TD, now: new Date(Date.now() - 85 * DAY_MS) });
    assert.ok(old.serverNotAfter.getTime() - Date.now() < 7 * DAY_MS);
    const renewed = await ensureCa({ secretsDir: secrets, trustDomain: TD });
    assert.deepEqual(renewed.created, { ca: false, server: true });
    assert.equal(renewed.caCertPem, old.caCertPem);
    assert.notEqual(renewed.serverCertPem, old.serverCertPem);
    assert.ok(renewed.serverNotAfter.getTime() > Date.now() + (SERVER_CERT_TTL_SECONDS * 1000 - DAY_MS));
    assert.equal(await readFile(join(secrets, 'server.pem'), 'utf8'), renewed.serverCertPem);
    const verify = await openssl(['verify', '-CAfile', 'ca.pem', 'server.pem'], secrets);
    assert.equal(verify.code, 0, verify.out);
  });

  void test('a new server host reissues the server certificate with it', async (t) => {
    const secrets = await tempDir(t);
    await ensureCa({ secretsDir: secrets, trustDomain: TD });
    const ca = await ensureCa({ secretsDir: secrets, trustDomain: TD, serverHosts: ['sandboxd.example.com', '10.1.2.3'] });
    assert.equal(ca.created.server, true);
    const cert = new X509Certificate(ca.serverCertPem);
    assert.equal(cert.checkHost('sandboxd.example.com'), 'sandboxd.example.com');
    assert.equal(cert.checkIP('10.1.2.3'), '10.1.2.3');
    assert.equal(cert.checkHost('localhost'), 'localhost');
    await assert.rejects(ensureCa({ secretsDir: secrets, trustDomain: TD, serverHosts: ['not a host'] }), SvcError);
  });

  void test('refuses a CA key readable by group or others, naming the fix', async (t) => {
    const secrets = await tempDir(t);
    await ensureCa({ secretsDir: secrets, trustDomain: TD });
    await chmod(join(secrets, 'ca-key.pem'), 0o640);
    await assert.rejects(ensureCa({ secretsDir: secrets, trustDomain: TD }), /ca-key\.pem.*mode 0640.*chmod 600/);
    await chmod(join(secrets, 'ca-key.pem'), 0o600);
    await chmod(join(secrets, 'server-key.pem'), 0o604);
    await assert.rejects(ensureCa({ secretsDir: secrets, trustDomain: TD }), /server-key\.pem.*chmod 600/);
  });

  void test('refuses half a CA instead of silently creating a new one', async (t) => {
    const secrets = await tempDir(t);
    await ensureCa({ secretsDir: secrets, trustDomain: TD });
    await rm(join(secrets, 'ca.pem'));
    await assert.rejects(ensureCa({ secretsDir: secrets, trustDomain: TD }), /holds ca-key\.pem but not ca\.pem/);
  });

  void test('refuses an expired CA', async (t) => {
    const secrets = await tempDir(t);
    await ensureCa({ secretsDir: secrets, trustDomain: TD, now: new Date(Date.now() - 3651 * DAY_MS) });
    await assert.rejects(ensureCa({ secretsDir: secrets, trustDomain: TD }), /CA .* expired/);
  });

  void test('adopts a P-256 CA made by openssl and refuses an RSA one', async (t) => {
    const secrets = await tempDir(t);
    const made = await openssl(
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        'ca-key.pem',
        '-out',
        'ca.pem',
        '-days',
        '30',
        '-subj',
        '/CN=operator CA',
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      secrets,
    );
    assert.equal(made.code, 0, made.out);
    await chmod(join(secrets, 'ca-key.pem'), 0o600);
    const ca = await ensureCa({ secretsDir: secrets, trustDomain: TD });
    assert.equal(ca.created.ca, false);
    const out = await tempDir(t);
    await writeAgentBundle(out, ca, { instanceId: 'i-ext' });
    const verify = await openssl(['verify', '-CAfile', 'ca.pem', 'agent.pem'], out);
    assert.equal(verify.code, 0, verify.out);

    const rsaDir = await tempDir(t);
    const rsa = await openssl(
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca-key.pem', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=rsa'],
      rsaDir,
    );
    assert.equal(rsa.code, 0, rsa.out);
    await chmod(join(rsaDir, 'ca-key.pem'), 0o600);
    await assert.rejects(ensureCa({ secretsDir: rsaDir, trustDomain: TD }), /ECDSA P-256/);
  });

  void test('refuses an invalid trust domain', async (t) => {
    await assert.rejects(ensureCa({ secretsDir: await tempDir(t), trustDomain: 'Bad_Domain' }), /trust domain/);
  });
});

void describe('client certificates', () => {
  void test('agent bundle: files, modes, openssl verify, SPIFFE URI SAN, clientAuth, CN', async (t) => {
    const ca = await ensureCa({ secretsDir: await tempDir(t), trustDomain: TD });
    const out = join(await tempDir(t), 'certs');
    const files = await writeAgentBundle(out, ca, { instanceId: 'i-0001' });
    assert.equal(files.spiffeId, 'spiffe://sandbox.local/agent/i-0001');
    assert.deepEqual((await readdir(out)).sort(), ['agent-key.pem', 'agent.pem', 'ca.pem']);
    assert.equal(await modeOf(out), '0700');
    assert.equal(await modeOf(files.key), '0600');
    assert.equal(await readFile(files.ca, 'utf8'), ca.caCertPem);

    const verify = await openssl(['verify', '-CAfile', 'ca.pem', 'agent.pem'], out);
    assert.equal(verify.code, 0, verify.out);
    assert.match(verify.out, /agent\.pem: OK/);
    const text = await openssl(
      ['x509', '-in', 'agent.pem', '-noout', '-subject', '-ext', 'subjectAltName,extendedKeyUsage,basicConstraints'],
      out,
    );
    assert.match(text.out, /URI:spiffe:\/\/sandbox\.local\/agent\/i-0001/);
    assert.match(text.out, /TLS Web Client Authentication/);
    assert.match(text.out, /CN\s*=\s*agent-i-0001/);
    assert.match(text.out, /CA:FALSE/);
    const keyMatches = await openssl(['x509', '-in', 'agent.pem', '-noout', '-checkend', '0'], out);
    assert.equal(keyMatches.code, 0, 'not expired');
    const days = (files.notAfter.getTime() - Date.now()) / DAY_MS;
    assert.ok(days > 29.9 && days <= 30, `default agent TTL is 30 days, got ${days}`);
  });

  void test('operator bundle: operator.pem with spiffe://<td>/operator/<name>', async (t) => {
    const ca = await ensureCa({ secretsDir: await tempDir(t), trustDomain: TD });
    const out = await tempDir(t);
    const files = await writeOperatorBundle(out, ca, { name: 'alice', ttlSeconds: 3600 });
    assert.deepEqual((await readdir(out)).sort(), ['ca.pem', 'operator-key.pem', 'operator.pem']);
    assert.equal(await modeOf(files.key), '0600');
    const verify = await openssl(['verify', '-CAfile', 'ca.pem', 'operator.pem'], out);
    assert.equal(verify.code, 0, verify.out);
    const text = await openssl(['x509', '-in', 'operator.pem', '-noout', '-ext', 'subjectAltName'], out);
    assert.match(text.out, /URI:spiffe:\/\/sandbox\.local\/operator\/alice/);
    assert.ok(Math.abs(files.notAfter.getTime() - (Date.now() + 3_600_000)) < 60_000);
  });

  void test('invalid instance ids and names are refused and nothing is written', async (t) => {
    const ca = await createStandaloneCa(TD);
    const out = await tempDir(t);
    for (const bad of ['', '.', '..', '../etc', 'a/b', 'a b', 'x'.repeat(129), 'é', 'a%2f', 'a\nb']) {
      await assert.rejects(
        issueAgentCert(ca, { instanceId: bad }),
        (err: unknown) => err instanceof SvcError && err.code === 'request.invalid',
        `instance id ${JSON.stringify(bad)}`,
      );
      await assert.rejects(writeOperatorBundle(out, ca, { name: bad }), SvcError);
    }
    assert.deepEqual(await readdir(out), []);
    await assert.rejects(issueAgentCert(ca, { instanceId: 'ok', ttlSeconds: 0 }), /ttlSeconds/);
    await assert.rejects(issueAgentCert(ca, { instanceId: 'ok', ttlSeconds: 1.5 }), /ttlSeconds/);
  });

  void test('a certificate issued in the past with a short TTL is expired for openssl', async (t) => {
    const ca = await ensureCa({ secretsDir: await tempDir(t), trustDomain: TD });
    const out = await tempDir(t);
    await writeAgentBundle(out, ca, { instanceId: 'i-old', now: new Date(Date.now() - 2 * DAY_MS), ttlSeconds: 3600 });
    const verify = await openssl(['verify', '-CAfile', 'ca.pem', 'agent.pem'], out);
    assert.notEqual(verify.code, 0);
    assert.match(verify.out, /expired/);
  });

  void test('a certificate from a foreign CA does not verify against ours', async (t) => {
    const ours = await ensureCa({ secretsDir: await tempDir(t), trustDomain: TD });
    const foreign = await createStandaloneCa(TD);
    assert.equal(foreign.files, null);
    const out = await tempDir(t);
    const issued = await issueAgentCert(foreign, { instanceId: 'i-0001' });
    await writeFile(join(out, 'ours.pem'), ours.caCertPem);
    await writeFile(join(out, 'agent.pem'), issued.certPem);
    const verify = await openssl(['verify', '-CAfile', 'ours.pem', 'agent.pem'], out);
    assert.notEqual(verify.code, 0);
  });
});
