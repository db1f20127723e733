/**
 * The SSH connector end to end with real OpenSSH (README "SSH connector"): a local VM's sshd
 * (LocalSshdSupervisor: TrustedUserCAKeys, an authorized-principals file, no authorized keys) on
 * 127.0.0.1, the connector in this process, and the real `ssh`/`scp` with `sbx ssh-proxy` as their
 * ProxyCommand. Certificates are signed here with `ssh-keygen -s` and a test CA (the lease route
 * does the same on the server). `sbx ssh` itself runs against a stand-in lease route that signs
 * with the same CA and records the lease the connector checks.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, connect, type Server } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import Database from 'better-sqlite3';
import pino from 'pino';
import { CredentialAuditLog } from '../../src/credentials/audit-log.js';
import { SshConnector, type LeaseMatch } from '../../src/gateway/ssh/connector.js';
import { LocalSshdSupervisor } from '../../src/vms/local-sshd.js';
import { runProgram, type ProgramRun } from '../support/run-program.js';
import { kBatchSsh } from '../support/ssh-options.js';

const execFileAsync = promisify(execFile);
const SBX_BIN = fileURLToPath(new URL('../../src/bin/sbx.js', import.meta.url));
const LOGIN_USER = userInfo().username;
const PRINCIPAL = 'agent';
const INSTANCE = 'i-ssh-1';

void describe('SSH connector with real sshd and ssh', () => {
  let dir: string;
  let sshd: LocalSshdSupervisor;
  let connector: SshConnector;
  let audit: CredentialAuditLog;
  let counter: Server;
  let counterPort: number;
  const counterConnections: Buffer[][] = [];
  /** actor:instance → lease; what the lease check finds. */
  const leases = new Map<string, LeaseMatch>();
  const logPath = (): string => join(dir, 'vms', 'vm-ssh', 'sshd.log');

  /** Signs dir/user.pub for `principal` with `validity`; returns the certificate's path. */
  async function sign(label: string, principal: string, validity: string): Promise<string> {
    const pub = join(dir, `${label}.pub`);
    await copyFile(join(dir, 'user.pub'), pub);
    await execFileAsync('ssh-keygen', ['-q', '-s', join(dir, 'ca'), '-I', `lease-${label}`, '-n', principal, '-V', validity, pub]);
    return join(dir, `${label}-cert.pub`);
  }

  function proxyCommand(actor: string, instance = INSTANCE): string {
    return `${process.execPath} ${SBX_BIN} ssh-proxy --connect 127.0.0.1:${connector.port} --actor ${actor} ${instance}`;
  }

  function sshOptions(cert: string | null, actor: string): string[] {
    return [
      ...kBatchSsh,
      '-i',
      join(dir, 'user'),
      ...(cert === null ? [] : ['-o', `CertificateFile=${cert}`]),
      '-o',
      'IdentitiesOnly=yes',
      '-o',
      'LogLevel=ERROR',
      '-o',
      `ProxyCommand=${proxyCommand(actor)}`,
    ];
  }

  const ssh = (cert: string | null, actor: string, command: string): Promise<ProgramRun> =>
    runProgram('ssh', [...sshOptions(cert, actor), '-l', LOGIN_USER, INSTANCE, command]);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-ssh-'));
    await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'test-ca', '-f', join(dir, 'ca')]);
    await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'user', '-f', join(dir, 'user')]);
    sshd = new LocalSshdSupervisor({ caPublicKeyPath: join(dir, 'ca.pub'), user: LOGIN_USER, principals: [PRINCIPAL] });
    await sshd.start({ vm: 'vm-ssh', vmDir: join(dir, 'vms', 'vm-ssh'), instanceId: INSTANCE });
    // A TCP stand-in for an sshd that records every connection and its bytes.
    counter = createServer((s) => {
      const got: Buffer[] = [];
      counterConnections.push(got);
      s.on('data', (c: Buffer) => got.push(c));
      s.on('error', () => undefined);
      s.write('SSH-2.0-standin\r\n');
    });
    await new Promise<void>((r) => counter.listen(0, '127.0.0.1', r));
    counterPort = (counter.address() as { port: number }).port;
    audit = new CredentialAuditLog(join(dir, 'audit'));
    connector = await SshConnector.start({
      listen: { host: '127.0.0.1', port: 0 },
      targets: [['i-standin', `127.0.0.1:${counterPort}`]],
      allowlist: [
        ['alice', '*'],
        ['mallory', 'i-other'],
        ['*', 'i-standin'],
      ],
      leaseCheck: (actor, instance) => leases.get(`${actor}:${instance}`),
      // A VM without an sshd (the minimal image) answers why.
      lookup: (instance) =>
        instance === 'i-minimal' ? { none: "VM 'i-minimal' runs the minimal image, which has no sshd" } : sshd.address(instance),
      audit,
      logger: pino({ level: 'silent' }),
      preludeTimeoutMs: 500,
    });
    leases.set(`alice:${INSTANCE}`, { id: 'sshlease_alice' });
    leases.set(`mallory:${INSTANCE}`, { id: 'sshlease_mallory' });
    leases.set('alice:i-standin', { id: 'sshlease_standin' });
  });

  after(async () => {
    await connector.close();
    await sshd.stopAll();
    await new Promise<void>((r) => counter.close(() => r()));
    audit.close();
    await rm(dir, { recursive: true, force: true });
  });

  void test('a CA-signed certificate for an authorized principal logs in and runs a command', async () => {
    const cert = await sign('ok', PRINCIPAL, '-1m:+10m');
    const r = await ssh(cert, 'alice', 'echo LOGIN_OK; id -un');
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split('\n'), ['LOGIN_OK', LOGIN_USER]);
    assert.match(await readFile(logPath(), 'utf8'), new RegExp(`Accepted publickey for ${LOGIN_USER} .*ED25519-CERT .* ID lease-ok `));
  });

  void test('the same key without the certificate is refused by sshd', async () => {
    const r = await ssh(null, 'alice', 'echo SHOULD_NOT_RUN');
    assert.equal(r.code, 255);
    assert.doesNotMatch(r.stdout, /SHOULD_NOT_RUN/);
    assert.match(r.stderr, /Permission denied \(publickey\)/);
  });

  void test('a certificate for another principal is refused by sshd', async () => {
    const cert = await sign('other', 'someone-else', '-1m:+10m');
    const r = await ssh(cert, 'alice', 'echo SHOULD_NOT_RUN');
    assert.equal(r.code, 255);
    assert.doesNotMatch(r.stdout, /SHOULD_NOT_RUN/);
    assert.match(await readFile(logPath(), 'utf8'), /Certificate does not contain an authorized principal/);
  });

  void test('an expired certificate is refused by sshd', async () => {
    const cert = await sign('expired', PRINCIPAL, '20200101:20200102');
    const r = await ssh(cert, 'alice', 'echo SHOULD_NOT_RUN');
    assert.equal(r.code, 255);
    assert.doesNotMatch(r.stdout, /SHOULD_NOT_RUN/);
    assert.match(await readFile(logPath(), 'utf8'), /Certificate invalid: expired|expired/);
  });

  void test('an actor not on the allowlist is refused by the connector before any byte reaches the target', async () => {
    const cert = await sign('mallory', PRINCIPAL, '-1m:+10m');
    const before = counterConnections.length;
    const sshdLog = await readFile(logPath(), 'utf8');
    // mallory holds a lease for INSTANCE but the allowlist names only i-other for her.
    const r = await ssh(cert, 'mallory', 'echo SHOULD_NOT_RUN');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /sbx: ssh\.not_allowed: actor mallory may not reach i-ssh-1/);
    assert.equal(await readFile(logPath(), 'utf8'), sshdLog, 'sshd logged no connection');
    // At the stand-in target (allowlisted for everyone, no lease for mallory): refused, never dialled.
    const raw = await rawExchange('mallory', 'i-standin', Buffer.from('SSH-2.0-client\r\n'));
    assert.deepEqual(JSON.parse(raw.toString()), {
      error: { code: 'ssh.lease_required', message: 'actor mallory holds no active SSH lease for i-standin (sbx ssh requests one)' },
    });
    const notListed = await rawExchange('nobody', INSTANCE, Buffer.alloc(0));
    assert.equal((JSON.parse(notListed.toString()) as { error: { code: string } }).error.code, 'ssh.not_allowed');
    assert.equal(counterConnections.length, before, 'the target saw no connection');
  });

  void test('an allowed, leased actor reaches the target, with the bytes behind the prelude in the same write', async () => {
    const first = Buffer.from('SSH-2.0-client\r\nfirst-bytes');
    const got = await rawExchange('alice', 'i-standin', first, 'SSH-2.0-standin\r\n'.length);
    assert.equal(got.toString(), 'SSH-2.0-standin\r\n');
    const seen = counterConnections.at(-1);
    assert.ok(seen !== undefined);
    await waitUntil(() => Buffer.concat(seen).length >= first.length);
    assert.equal(Buffer.concat(seen).toString(), first.toString());
  });

  void test('prelude too large, too slow, malformed or of another access mode: one JSON error line', async () => {
    const big = await rawBytes(Buffer.from(`{"actor":"${'a'.repeat(5000)}"`));
    assert.equal(errorCode(big), 'ssh.prelude_too_large');
    const slow = await rawBytes(Buffer.from('{"actor":"alice"'));
    assert.equal(errorCode(slow), 'ssh.prelude_timeout');
    assert.equal(errorCode(await rawBytes(Buffer.from('not json\n'))), 'ssh.prelude_invalid');
    assert.equal(
      errorCode(await rawBytes(Buffer.from('{"actor":"alice","instance_id":"i-ssh-1","access_mode":"rdp"}\n'))),
      'ssh.access_mode_unsupported',
    );
    assert.equal(
      errorCode(await rawBytes(Buffer.from('{"actor":"alice","instance_id":"nowhere","access_mode":"ssh"}\n'))),
      'ssh.lease_required',
    );
    leases.set('alice:nowhere', { id: 'sshlease_nowhere' });
    assert.equal(
      errorCode(await rawBytes(Buffer.from('{"actor":"alice","instance_id":"nowhere","access_mode":"ssh"}\n'))),
      'ssh.unknown_instance',
    );
    leases.set('alice:i-minimal', { id: 'sshlease_minimal' });
    const minimal = (await rawBytes(Buffer.from('{"actor":"alice","instance_id":"i-minimal","access_mode":"ssh"}\n'))).toString();
    assert.equal(errorCode(Buffer.from(minimal)), 'ssh.no_endpoint');
    assert.match(minimal, /minimal image, which has no sshd/);
  });

  void test('a 50 MB scp through the connector arrives intact, and the connector holds no more than its buffers', async (t) => {
    const cert = await sign('scp', PRINCIPAL, '-1m:+10m');
    const src = join(dir, 'big.bin');
    const dst = join(dir, 'big.copy');
    const data = randomBytes(50 * 1024 * 1024);
    await writeFile(src, data);
    const sha = createHash('sha256').update(data).digest('hex');
    const base = memory();
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, memory() - base)), 50);
    const r = await runProgram('scp', [...sshOptions(cert, 'alice'), '-q', src, `${LOGIN_USER}@${INSTANCE}:${dst}`]);
    clearInterval(sampler);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      createHash('sha256')
        .update(await readFile(dst))
        .digest('hex'),
      sha,
    );
    // Heap and buffers grew by far less than the file: the bytes were streamed, not collected.
    t.diagnostic(`peak growth of live heap and buffers while 50 MiB passed: ${(peak / 1048576).toFixed(2)} MiB`);
    assert.ok(peak < 16 * 1024 * 1024, `the connector's memory grew by ${(peak / 1048576).toFixed(1)} MiB while 50 MiB passed`);
  });

  void test('sessions are audited: decisions with codes, closes with bytes each way and duration', () => {
    const today = new Date().toISOString().slice(0, 10);
    const rows = audit.day(today);
    const opened = rows.filter((r) => r.action === 'gateway_ssh_session.open' && r.outcome === 'allowed');
    assert.ok(
      opened.some((r) => r.actor === 'alice' && r.resource.lease_id === 'sshlease_alice' && r.correlation.instance_id === INSTANCE),
    );
    assert.ok(
      rows.some(
        (r) =>
          r.action === 'gateway_ssh_session.open' && r.outcome === 'denied' && r.reason_code === 'ssh.not_allowed' && r.actor === 'mallory',
      ),
    );
    const closes = rows.filter((r) => r.action === 'gateway_ssh_session.close');
    assert.ok(closes.length >= opened.length - 1);
    // The scp session: its bytes up exceed the file, and nothing of the stream is kept.
    const db = readAuditDetails(join(dir, 'audit'));
    assert.ok(db.some((d) => d.bytes_up > 50 * 1024 * 1024 && d.bytes_down > 0 && d.duration_ms >= 0));
  });

  void test('sbx ssh requests a lease, uses its certificate and runs the command', async () => {
    const home = await mkdtemp(join(tmpdir(), 'sbx-ssh-home-'));
    await mkdir(join(home, '.ssh'), { mode: 0o700 });
    await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(home, '.ssh', 'id_ed25519')]);
    const requests: Record<string, unknown>[] = [];
    const api = await leaseStandIn(dir, requests, (actor, instance, id) => leases.set(`${actor}:${instance}`, { id }));
    /** `sbx ssh … echo VIA_SBX_SSH` as `actor`, against the lease stand-in and the connector. */
    const sbxSsh = (actor: string): Promise<ProgramRun> =>
      runProgram(
        process.execPath,
        [
          SBX_BIN,
          'ssh',
          '--server',
          `http://127.0.0.1:${(api.address() as { port: number }).port}`,
          '--connect',
          `127.0.0.1:${connector.port}`,
          '--actor',
          actor,
          '-l',
          LOGIN_USER,
          '--principal',
          PRINCIPAL,
          INSTANCE,
          '--',
          ...kBatchSsh,
          'echo',
          'VIA_SBX_SSH',
        ],
        { HOME: home, XDG_CONFIG_HOME: home },
      );
    try {
      const r = await sbxSsh('carol');
      // carol is allowed by no rule: the lease is issued, the connector still refuses.
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /ssh\.not_allowed/);
      assert.equal(requests.length, 1);
      const body = requests[0] as Record<string, unknown>;
      assert.equal(body['actor'], 'carol');
      assert.equal(body['instance_id'], INSTANCE);
      assert.equal(body['principal'], PRINCIPAL);
      assert.equal(body['access_mode'], 'ssh');
      assert.equal(body['public_key'], (await readFile(join(home, '.ssh', 'id_ed25519.pub'), 'utf8')).trim());
      const ok = await sbxSsh('alice');
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal(ok.stdout.trim(), 'VIA_SBX_SSH');
      assert.match(ok.stderr, /sbx: lease sshlease_standin_2 for alice on i-ssh-1/);
    } finally {
      await new Promise<void>((r) => api.close(() => r()));
      await rm(home, { recursive: true, force: true });
    }
  });

  void test('a stopped local sshd takes its address with it', async () => {
    await sshd.start({ vm: 'vm-gone', vmDir: join(dir, 'vms', 'vm-gone'), instanceId: 'i-gone' });
    const addr = sshd.address('vm-gone');
    assert.ok(addr !== null);
    assert.deepEqual(sshd.address('i-gone'), addr);
    await sshd.stop('vm-gone');
    assert.equal(sshd.address('i-gone'), null);
    // stop() resolves once the process has exited; its log says it was told to go. (Whether the
    // port is free now is not asserted: another process may have taken it since.)
    assert.match(await readFile(join(dir, 'vms', 'vm-gone', 'sshd.log'), 'utf8'), /Received signal 15; terminating/);
  });

  void test('a CA public key ssh-keygen cannot read, or a bad user or principal, is a start-up error naming the variable', async () => {
    await writeFile(join(dir, 'not-a-key.pub'), 'hello\n');
    await assert.rejects(
      LocalSshdSupervisor.check({ caPublicKeyPath: join(dir, 'not-a-key.pub'), user: 'agent', principals: [] }),
      /^Error: SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH=.*not-a-key\.pub: not an SSH public key/,
    );
    await assert.rejects(
      LocalSshdSupervisor.check({ caPublicKeyPath: join(dir, 'missing.pub'), user: 'agent', principals: [] }),
      /SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH/,
    );
    await assert.rejects(
      LocalSshdSupervisor.check({ caPublicKeyPath: join(dir, 'ca.pub'), user: 'a b', principals: [] }),
      /SVC_GATEWAY_SSH_AUTHORIZED_USER/,
    );
    await assert.rejects(
      LocalSshdSupervisor.check({ caPublicKeyPath: join(dir, 'ca.pub'), user: 'agent', principals: ['ok', 'no\nnewline'] }),
      /SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS/,
    );
    await LocalSshdSupervisor.check({ caPublicKeyPath: join(dir, 'ca.pub'), user: 'agent', principals: ['agent', 'ops'] });
  });

  void test('close() stops listening and cuts the sessions it carries', async () => {
    const c = await SshConnector.start({
      listen: { host: '127.0.0.1', port: 0 },
      targets: [['i-standin', `127.0.0.1:${counterPort}`]],
      allowlist: [['*', '*']],
      leaseCheck: () => ({ id: 'sshlease_close' }),
      logger: pino({ level: 'silent' }),
    });
    const s = connect(c.port, '127.0.0.1');
    const closed = new Promise<void>((resolve) => s.once('close', () => resolve()));
    s.on('error', () => undefined);
    const banner = new Promise<string>((resolve) => s.once('data', (d: Buffer) => resolve(d.toString())));
    s.write('{"actor":"alice","instance_id":"i-standin","access_mode":"ssh"}\n');
    assert.equal(await banner, 'SSH-2.0-standin\r\n');
    assert.equal(c.connections, 2, 'the client and its target');
    await c.close();
    await closed;
    assert.equal(c.connections, 0);
    const refused = await new Promise<boolean>((resolve) => {
      const again = connect(c.port, '127.0.0.1');
      again.once('connect', () => {
        again.destroy();
        resolve(false);
      });
      again.once('error', () => resolve(true));
    });
    assert.ok(refused, 'nothing listens after close');
  });

  /** Sends a prelude and `rest` in one write; resolves with what came back (up to `want` bytes, or until the close). */
  function rawExchange(actor: string, instance: string, rest: Buffer, want = Infinity): Promise<Buffer> {
    const line = Buffer.from(`${JSON.stringify({ actor, instance_id: instance, access_mode: 'ssh' })}\n`);
    return rawBytes(Buffer.concat([line, rest]), want);
  }

  function rawBytes(payload: Buffer, want = Infinity): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const s = connect(connector.port, '127.0.0.1');
      const got: Buffer[] = [];
      let size = 0;
      s.on('data', (c: Buffer) => {
        got.push(c);
        size += c.length;
        if (size >= want) {
          s.destroy();
          resolve(Buffer.concat(got));
        }
      });
      s.once('error', reject);
      s.once('close', () => resolve(Buffer.concat(got)));
      s.write(payload);
    });
  }
});

function errorCode(b: Buffer): string {
  const text = b.toString();
  assert.ok(text.endsWith('\n') && text.indexOf('\n') === text.length - 1, `one line: ${JSON.stringify(text)}`);
  return (JSON.parse(text) as { error: { code: string } }).error.code;
}

v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Live heap and buffers after a full collection: what is held, not garbage not yet collected. */
function memory(): number {
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

async function waitUntil(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(check());
}

interface CloseDetails {
  bytes_up: number;
  bytes_down: number;
  duration_ms: number;
}

/** The close records' details, from the file (the route's projection never returns details). */
function readAuditDetails(auditDir: string): CloseDetails[] {
  const db = new Database(join(auditDir, 'credential-audit.db'), { readonly: true });
  try {
    const rows = db.prepare(`SELECT details FROM audit WHERE action = 'gateway_ssh_session.close'`).all() as { details: string }[];
    return rows.map((r) => JSON.parse(r.details) as CloseDetails);
  } finally {
    db.close();
  }
}

/** A stand-in for POST /api/v2/gateway/ssh/leases: signs the key with the test CA for the asked principal. */
async function leaseStandIn(
  dir: string,
  requests: Record<string, unknown>[],
  record: (actor: string, instance: string, id: string) => void,
): Promise<HttpServer> {
  let n = 0;
  const server = createHttpServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      void (async () => {
        const body = JSON.parse(Buffer.concat(parts).toString()) as Record<string, unknown>;
        requests.push(body);
        const id = `sshlease_standin_${++n}`;
        const pub = join(dir, `${id}.pub`);
        await writeFile(pub, `${String(body['public_key'])}\n`);
        await execFileAsync('ssh-keygen', ['-q', '-s', join(dir, 'ca'), '-I', id, '-n', String(body['principal']), '-V', '-1m:+10m', pub]);
        record(String(body['actor']), String(body['instance_id']), id);
        const certificate = (await readFile(join(dir, `${id}-cert.pub`), 'utf8')).trim();
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id, expires_at: new Date(Date.now() + 600_000).toISOString(), certificate }));
      })();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}
