/**
 * SSH leases end to end on real parts: the admin listener with operator certificates (mutual
 * TLS), the trusted local listener, real SQLite, a real OpenSSH CA key and ssh-keygen signing, and
 * ssh-keygen reading what comes back. What a user would notice: the certificate says the lease
 * (key id, principal, window) and is signed by the CA; the records, responses, audit, log and
 * database files never hold the key body or the certificate; each refusal has its own code; a
 * revoked lease stays readable; the leases survive a restart.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { codeOf, removeDir, startSshLeaseServer, type Reply, type SshLeaseServer } from './ssh-leases-harness.js';
import { sshKeygen, type TestSshKey } from '../support/ssh-keys.js';

const LEASES = '/api/v2/gateway/ssh/leases';

/** Everything under `dir`, every file's bytes (the databases with their WAL files). */
function allBytes(dir: string): Buffer {
  const out: Buffer[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(readFileSync(join(e.parentPath, e.name)));
  }
  return Buffer.concat(out);
}

void describe('SSH leases over mutual TLS, signed by a real OpenSSH CA', () => {
  let work: string;
  let h: SshLeaseServer;
  let signTmp: string;
  const savedTmp = process.env['TMPDIR'];
  const key = (name: string, type = 'ed25519', bits?: number): TestSshKey =>
    sshKeygen(join(work, name), { type, ...(bits === undefined ? {} : { bits }), comment: `${name}@test` });
  let user: TestSshKey;
  let caPath: string;

  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'sbx-sshlease-work-'));
    caPath = key('ca').path;
    user = key('laptop');
    h = await startSshLeaseServer({
      SVC_GATEWAY_SSH_CA_KEY: caPath,
      SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS: 'agent,deploy',
      SVC_GATEWAY_SSH_TARGETS: 'devbox=127.0.0.1:2222',
    });
    signTmp = join(work, 'tmp');
    mkdirSync(signTmp);
    // The signer's temporary directories go here, so the test can see that none is left behind.
    process.env['TMPDIR'] = signTmp;
  });
  after(async () => {
    if (savedTmp === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = savedTmp;
    await h?.stop();
    if (h !== undefined) await removeDir(h.dir);
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
  });

  const request = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
    actor: 'carol',
    instance_id: 'test',
    principal: 'agent',
    access_mode: 'ssh',
    public_key: user.pub,
    ttl_seconds: 900,
    ...over,
  });

  void test('issue signs the key: ssh-keygen -L shows the lease id, the principal, the window and the CA; nothing is left in the temporary directory', async () => {
    const r = await h.admin('carol', 'POST', LEASES, request());
    assert.equal(r.status, 201, r.text);
    const lease = r.json;
    const id = lease['id'] as string;
    assert.match(id, /^sshlease_[0-9a-f]{32}$/);
    assert.equal(lease['actor'], 'carol');
    assert.equal(lease['state'], 'active');
    assert.equal(lease['certificate_key_id'], id);
    assert.equal(lease['revoked_at'], null);
    assert.equal(lease['revocation_effect'], 'metadata_only_until_certificate_expiry');
    // ssh-keygen -lf prints the digest as SHA256:<base64>; the record holds it as sha256:<hex> (spec part 2).
    const fp = execFileSync('ssh-keygen', ['-l', '-f', `${user.path}.pub`], { encoding: 'utf8' }).split(' ')[1] ?? '';
    assert.match(fp, /^SHA256:/);
    assert.equal(lease['public_key_sha256'], `sha256:${Buffer.from(fp.slice('SHA256:'.length), 'base64').toString('hex')}`);
    assert.equal(Date.parse(lease['expires_at'] as string) - Date.parse(lease['issued_at'] as string), 900_000);

    const certPath = `${user.path}-cert.pub`;
    writeFileSync(certPath, `${lease['certificate'] as string}\n`);
    const shown = execFileSync('ssh-keygen', ['-L', '-f', certPath], { encoding: 'utf8', env: { ...process.env, TZ: 'UTC' } });
    assert.match(shown, new RegExp(`Key ID: "${id}"`));
    assert.match(shown, /Type: ssh-ed25519-cert-v01@openssh.com user certificate/);
    const caFp = execFileSync('ssh-keygen', ['-l', '-f', `${caPath}.pub`], { encoding: 'utf8' }).split(' ')[1] as string;
    assert.ok(shown.includes(`Signing CA: ED25519 ${caFp}`), shown);
    assert.match(shown, /Principals: \n\s+agent\n\s+Critical Options: \(none\)/);
    const from = (lease['issued_at'] as string).slice(0, 19);
    const to = (lease['expires_at'] as string).slice(0, 19);
    assert.ok(shown.includes(`Valid: from ${from} to ${to}`), shown);
    assert.match(shown, /Extensions: \n\s+permit-port-forwarding\n\s+permit-pty\n?$/);
    assert.deepEqual(readdirSync(signTmp), [], 'the signing directory is removed');
    // The certificate's own fingerprint is the one recorded.
    const certBlob = Buffer.from((lease['certificate'] as string).split(' ')[1] ?? '', 'base64');
    const { createHash } = await import('node:crypto');
    assert.equal(lease['certificate_sha256'], `sha256:${createHash('sha256').update(certBlob).digest('hex')}`);

    // An SSH target from SVC_GATEWAY_SSH_TARGETS is an instance too, and principals come from the list.
    const target = await h.admin('alice', 'POST', LEASES, request({ actor: 'alice', instance_id: 'devbox', principal: 'deploy' }));
    assert.equal(target.status, 201, target.text);
  });

  void test('get, list, audit, the log and the database files never hold the key body or the certificate', async () => {
    const issued = await h.admin('carol', 'POST', LEASES, request({ ttl_seconds: 60 }));
    assert.equal(issued.status, 201);
    const id = issued.json['id'] as string;
    const keyBody = user.pub.split(' ')[1] as string;
    const certBody = (issued.json['certificate'] as string).split(' ')[1] as string;
    const one = await h.admin('bob', 'GET', `${LEASES}/${id}`);
    assert.equal(one.status, 200);
    assert.deepEqual(one.json, Object.fromEntries(Object.entries(issued.json).filter(([k]) => k !== 'certificate')));
    const list = await h.admin('bob', 'GET', `${LEASES}?actor=carol&limit=500`);
    assert.equal(list.status, 200);
    assert.equal(list.json['limit'], 500);
    assert.equal(list.json['offset'], 0);
    assert.ok((list.json['leases'] as { id: string }[]).some((l) => l.id === id));
    assert.equal(list.json['total'], (list.json['leases'] as unknown[]).length);
    const revoked = await h.admin('carol', 'DELETE', `${LEASES}/${id}`);
    const audit = await h.admin('bob', 'GET', `/api/v2/credentials/audit?date=${new Date().toISOString().slice(0, 10)}`);
    for (const r of [one, list, revoked, audit]) {
      assert.ok(
        !r.text.includes(keyBody.slice(12, 60)) && !r.text.includes(certBody.slice(40, 90)) && !r.text.includes('certificate"'),
        r.text,
      );
    }
    const files = allBytes(h.dir);
    assert.ok(!files.includes(keyBody.slice(12, 60)), 'no key body in any file (databases, WAL, log)');
    assert.ok(!files.includes(certBody.slice(40, 90)), 'no certificate in any file');
    assert.ok(files.includes(id), 'the lease is there');
  });

  void test('revoke keeps the record with the revocation effect; audit shows issue and revoke with actor and lease id', async () => {
    const issued = await h.admin('carol', 'POST', LEASES, request());
    const id = issued.json['id'] as string;
    const viewer = await h.admin('bob', 'DELETE', `${LEASES}/${id}`);
    assert.equal(viewer.status, 403);
    assert.equal(codeOf(viewer), 'auth.permission_denied');
    const r = await h.admin('alice', 'DELETE', `${LEASES}/${id}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json['state'], 'revoked');
    assert.equal(typeof r.json['revoked_at'], 'string');
    assert.equal(r.json['revocation_effect'], 'metadata_only_until_certificate_expiry');
    const again = await h.admin('carol', 'GET', `${LEASES}/${id}`);
    assert.deepEqual(again.json, r.json);
    assert.equal((await h.admin('carol', 'DELETE', `${LEASES}/${id}`)).json['revoked_at'], r.json['revoked_at']);
    const revokedList = await h.admin('carol', 'GET', `${LEASES}?state=revoked`);
    assert.ok((revokedList.json['leases'] as { id: string }[]).some((l) => l.id === id));

    const audit = await h.admin('bob', 'GET', `/api/v2/credentials/audit?date=${new Date().toISOString().slice(0, 10)}`);
    const records = audit.json['records'] as { action: string; actor: string; outcome: string; resource: { lease_id: string } }[];
    const of = records.filter((x) => x.resource.lease_id === id).map((x) => `${x.action}:${x.actor}:${x.outcome}`);
    assert.deepEqual(of.sort(), ['gateway_ssh_lease.issue:carol:allowed', 'gateway_ssh_lease.revoke:alice:allowed']);
  });

  void test('the trusted local listener claims no SSH identity: every lease route is 403 auth.ssh_identity_required', async () => {
    const issued = await h.admin('carol', 'POST', LEASES, request());
    const id = issued.json['id'] as string;
    const calls: Reply[] = [
      await h.local('POST', LEASES, request({ actor: 'local' })),
      await h.local('GET', LEASES),
      await h.local('GET', `${LEASES}/${id}`),
      await h.local('DELETE', `${LEASES}/${id}`),
    ];
    for (const r of calls) {
      assert.equal(r.status, 403, r.text);
      assert.equal(codeOf(r), 'auth.ssh_identity_required');
    }
    assert.equal((await h.admin('carol', 'GET', `${LEASES}/${id}`)).json['state'], 'active');
  });

  void test('every refusal has its own status and code, and nothing is issued for any', async () => {
    const before = (await h.admin('alice', 'GET', LEASES)).json['total'];
    const rsa1024 = key('old', 'rsa', 1024).pub;
    const cases: [string, Promise<Reply>, number, string][] = [
      ['viewer', h.admin('bob', 'POST', LEASES, request({ actor: 'bob' })), 403, 'auth.permission_denied'],
      ['actor', h.admin('carol', 'POST', LEASES, request({ actor: 'alice' })), 403, 'ssh_lease.actor_mismatch'],
      ['admin for another', h.admin('alice', 'POST', LEASES, request({ actor: 'carol' })), 403, 'ssh_lease.actor_mismatch'],
      ['junk key', h.admin('carol', 'POST', LEASES, request({ public_key: 'ssh-ed25519 AAAA' })), 400, 'ssh_lease.public_key_invalid'],
      ['private key', h.admin('carol', 'POST', LEASES, request({ public_key: user.priv })), 400, 'ssh_lease.private_key_refused'],
      ['rsa 1024', h.admin('carol', 'POST', LEASES, request({ public_key: rsa1024 })), 400, 'ssh_lease.public_key_unsupported'],
      ['instance', h.admin('carol', 'POST', LEASES, request({ instance_id: 'agent-nowhere' })), 404, 'ssh_lease.instance_not_found'],
      ['ttl 0', h.admin('carol', 'POST', LEASES, request({ ttl_seconds: 0 })), 400, 'ssh_lease.ttl_out_of_range'],
      ['ttl max+1', h.admin('carol', 'POST', LEASES, request({ ttl_seconds: 3601 })), 400, 'ssh_lease.ttl_out_of_range'],
      ['principal', h.admin('carol', 'POST', LEASES, request({ principal: 'root' })), 403, 'ssh_lease.principal_not_allowed'],
      ['access mode', h.admin('carol', 'POST', LEASES, request({ access_mode: 'rdp' })), 400, 'ssh_lease.access_mode_unsupported'],
      ['unknown field', h.admin('carol', 'POST', LEASES, request({ force_command: '/bin/sh' })), 400, 'request.invalid'],
      ['missing field', h.admin('carol', 'POST', LEASES, { ...request(), ttl_seconds: undefined }), 400, 'request.invalid'],
      ['get unknown', h.admin('carol', 'GET', `${LEASES}/sshlease_${'0'.repeat(32)}`), 404, 'ssh_lease.not_found'],
      ['revoke unknown', h.admin('carol', 'DELETE', `${LEASES}/nope`), 404, 'ssh_lease.not_found'],
      ['page too big', h.admin('carol', 'GET', `${LEASES}?limit=501`), 400, 'request.invalid'],
    ];
    for (const [what, pending, status, code] of cases) {
      const r = await pending;
      assert.equal(r.status, status, `${what}: ${r.text}`);
      assert.equal(codeOf(r), code, what);
      assert.ok(!r.text.includes(user.priv.split('\n')[1] ?? '-'), `${what}: the private key is not echoed`);
    }
    assert.equal((await h.admin('alice', 'GET', LEASES)).json['total'], before);
    // The private key appears in no file (the log at trace level included).
    assert.ok(!allBytes(h.dir).includes(user.priv.split('\n')[1] ?? '-'));
    const audit = await h.admin('bob', 'GET', `/api/v2/credentials/audit?date=${new Date().toISOString().slice(0, 10)}`);
    const denied = (audit.json['records'] as { action: string; outcome: string; reason_code: string }[])
      .filter((x) => x.action === 'gateway_ssh_lease.issue' && x.outcome === 'denied')
      .map((x) => x.reason_code);
    assert.ok(denied.includes('ssh_lease.principal_not_allowed') && denied.includes('ssh_lease.private_key_refused'), denied.join(' '));
    const metrics = await h.server.metrics.registry.metrics();
    assert.match(metrics, /svc_gateway_ssh_lease_requests_total\{outcome="ssh_lease.ttl_out_of_range"\} 2/);
    assert.match(metrics, /svc_gateway_ssh_lease_requests_total\{outcome="issued"\} [1-9]/);
    assert.match(metrics, /svc_gateway_ssh_leases_active [1-9]/);
  });

  void test('leases survive a restart: same records, the active one still active, the revoked one still revoked', async () => {
    const a = await h.admin('carol', 'POST', LEASES, request());
    const b = await h.admin('carol', 'POST', LEASES, request());
    await h.admin('carol', 'DELETE', `${LEASES}/${b.json['id'] as string}`);
    const listBefore = await h.admin('alice', 'GET', `${LEASES}?limit=500`);
    await h.stop();
    h = await startSshLeaseServer({ SVC_GATEWAY_SSH_CA_KEY: caPath, SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS: 'agent,deploy' }, h.dir);
    const listAfter = await h.admin('alice', 'GET', `${LEASES}?limit=500`);
    assert.deepEqual(listAfter.json, listBefore.json);
    assert.equal((await h.admin('carol', 'GET', `${LEASES}/${a.json['id'] as string}`)).json['state'], 'active');
    assert.equal(h.server.service('sshLeases').findActive('carol', 'test')?.actor, 'carol');
    assert.equal((await h.admin('carol', 'GET', `${LEASES}/${b.json['id'] as string}`)).json['state'], 'revoked');
  });
});

void describe('SSH leases without a CA key, and CA keys that cannot be used', () => {
  let work: string;
  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'sbx-sshlease-noca-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  void test('without SVC_GATEWAY_SSH_CA_KEY issue records the lease and returns no certificate', async () => {
    execFileSync('ssh-keygen', ['-q', '-t', 'ecdsa', '-N', '', '-f', join(work, 'k')]);
    const h = await startSshLeaseServer({});
    try {
      const r = await h.admin('carol', 'POST', LEASES, {
        actor: 'carol',
        instance_id: 'test',
        principal: 'agent',
        access_mode: 'ssh',
        public_key: readFileSync(join(work, 'k.pub'), 'utf8'),
        ttl_seconds: 60,
      });
      assert.equal(r.status, 201, r.text);
      assert.equal('certificate' in r.json, false);
      assert.equal(r.json['certificate_key_id'], null);
      assert.equal(r.json['certificate_sha256'], null);
    } finally {
      await h.stop();
      await removeDir(h.dir);
    }
  });

  void test('a missing, encrypted or non-key CA file is a start-up error naming SVC_GATEWAY_SSH_CA_KEY', async () => {
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'a passphrase', '-f', join(work, 'locked')]);
    writeFileSync(join(work, 'junk'), 'not a key\n', { mode: 0o600 });
    for (const path of [join(work, 'missing'), join(work, 'locked'), join(work, 'junk')]) {
      const dir = await mkdtemp(join(tmpdir(), 'sbx-sshlease-bad-'));
      try {
        await assert.rejects(startSshLeaseServer({ SVC_GATEWAY_SSH_CA_KEY: path }, dir), (err: Error) => {
          assert.ok(err.message.startsWith(`SVC_GATEWAY_SSH_CA_KEY=${path}:`), err.message);
          return true;
        });
      } finally {
        await removeDir(dir);
      }
    }
  });
});
