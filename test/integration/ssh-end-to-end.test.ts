/**
 * Issue 18 end to end, with nothing stood in: the whole server (DEFAULT_COMPONENTS) with an SSH CA
 * key, the lease routes on the admin listener, the connector and a test:///default VM's local
 * sshd; `sbx ssh` as an operator (SBX_OPERATOR_CERTS) requests a lease, gets a certificate signed
 * by the server and logs in through the connector. Revoking the lease closes the connector to new
 * connections at once (the certificate itself stays valid until it expires: the spec's
 * revocation effect).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pino from 'pino';
import { ensureCa, issueOperatorCert } from '../../src/identity/ca.js';
import { DEFAULT_COMPONENTS, startServer, type ServerHandle } from '../../src/main.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { runProgram } from '../support/run-program.js';
import { mtlsRequest } from '../support/mtls-request.js';
import { kBatchSsh } from '../support/ssh-options.js';

const execFileAsync = promisify(execFile);
const SBX_BIN = fileURLToPath(new URL('../../src/bin/sbx.js', import.meta.url));
const LOGIN_USER = userInfo().username;
const VM = `agent-sshe2e-${Math.random().toString(36).slice(2, 7)}`;

void describe('SSH end to end: lease, certificate, connector, sshd', () => {
  let dir: string;
  let server: ServerHandle;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-sshe2e-'));
    await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'ca')]);
    await mkdir(join(dir, 'home', '.ssh'), { recursive: true, mode: 0o700 });
    await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'home', '.ssh', 'id_ed25519')]);
    await writeFile(join(dir, 'roles.json'), JSON.stringify({ alice: 'operator' }));
    const config = loopbackConfig(join(dir, 'state'), {
      SVC_ACTOR_SHARDS: '1',
      SVC_SHUTDOWN_DEADLINE_MS: '8000',
      SVC_OPERATOR_ROLES: join(dir, 'roles.json'),
      SVC_GATEWAY_SSH_CA_KEY: join(dir, 'ca'),
      SVC_GATEWAY_SSH_LISTEN: '127.0.0.1:0',
      SVC_GATEWAY_SSH_ALLOWLIST: `alice=${VM}`,
      SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH: join(dir, 'ca.pub'),
      SVC_GATEWAY_SSH_AUTHORIZED_USER: LOGIN_USER,
      SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS: 'agent',
    });
    server = await startServer(config, pino({ level: 'silent' }), { components: DEFAULT_COMPONENTS });
    const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    const cert = await issueOperatorCert(ca, { name: 'alice' });
    await mkdir(join(dir, 'alice'), { mode: 0o700 });
    await writeFile(join(dir, 'alice', 'ca.pem'), ca.caCertPem);
    await writeFile(join(dir, 'alice', 'operator.pem'), cert.certPem);
    await writeFile(join(dir, 'alice', 'operator-key.pem'), cert.keyPem, { mode: 0o600 });
    env = {
      HOME: join(dir, 'home'),
      XDG_CONFIG_HOME: join(dir, 'home'),
      SBX_SERVER: `https://127.0.0.1:${server.ports.admin}`,
      SBX_OPERATOR_CERTS: join(dir, 'alice'),
      SVC_GATEWAY_SSH_CONNECT: `127.0.0.1:${server.service('sshConnector').port}`,
      SVC_GATEWAY_SSH_ACTOR: 'alice',
    };
    const created = await fetch(`http://127.0.0.1:${server.ports.http}/api/v1/vms`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: VM }),
    });
    const op = ((await created.json()) as { operation: { id: string } }).operation.id;
    await waitFor(
      `VM ${VM} created`,
      async () => {
        const o = (await (await fetch(`http://127.0.0.1:${server.ports.http}/api/v1/operations/${op}`)).json()) as { status: string };
        return o.status === 'completed' ? true : undefined;
      },
      { deadlineMs: DEADLINE_MS.agent, intervalMs: 100 },
    );
  });

  after(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const sshArgs = kBatchSsh;

  void test('sbx ssh gets a lease and a certificate from the server and logs in through the connector; revoke closes the connector', async () => {
    const r = await runProgram(
      process.execPath,
      [SBX_BIN, 'ssh', VM, '-l', LOGIN_USER, '--principal', 'agent', '--ttl', '120', '--', ...sshArgs, 'echo', 'E2E_OK'],
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'E2E_OK');
    const id = /sbx: lease (sshlease_\S+) for alice/.exec(r.stderr)?.[1];
    assert.ok(id !== undefined, r.stderr);
    // Revoke it (sbx has no lease verbs: a direct call as the operator), then alice's next
    // connection is refused by the connector before sshd.
    const { status: revoked } = await mtlsRequest(
      {
        port: server.ports.admin,
        ca: readFileSync(join(dir, 'alice', 'ca.pem')),
        cert: readFileSync(join(dir, 'alice', 'operator.pem')),
        key: readFileSync(join(dir, 'alice', 'operator-key.pem')),
      },
      'DELETE',
      `/api/v2/gateway/ssh/leases/${id}`,
    );
    assert.equal(revoked, 200);
    const after = await runProgram(
      process.execPath,
      [SBX_BIN, 'ssh', VM, '--no-lease', '-l', LOGIN_USER, '--', ...sshArgs, 'echo', 'NO'],
      env,
    );
    assert.notEqual(after.code, 0);
    assert.match(after.stderr, /sbx: ssh\.lease_required: actor alice holds no active SSH lease/);
  });

  void test("a lease names the VM by its instance id (uuid) as well as by its name; the allowlist's rules are per name given", async () => {
    const vm = (await (await fetch(`http://127.0.0.1:${server.ports.http}/api/v1/vms/${VM}`)).json()) as { uuid: string };
    assert.match(vm.uuid, /^[0-9a-f-]{36}$/);
    const r = await runProgram(
      process.execPath,
      [SBX_BIN, 'ssh', vm.uuid, '-l', LOGIN_USER, '--principal', 'agent', '--ttl', '120', '--', ...sshArgs, 'echo', 'BY_ID'],
      env,
    );
    assert.match(
      r.stderr,
      new RegExp(`sbx: lease sshlease_[0-9a-f]{32} for alice on ${vm.uuid} until `),
      'the lease was issued for the uuid',
    );
    // SVC_GATEWAY_SSH_ALLOWLIST here allows alice the VM's name only: the connector refuses the
    // uuid before sshd, by the allowlist (not for want of a lease or an endpoint).
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /sbx: ssh\.not_allowed: actor alice may not reach /);
    assert.notEqual(r.stdout.trim(), 'BY_ID');
  });
});
