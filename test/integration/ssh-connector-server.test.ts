/**
 * The SSH connector inside the whole server, configured only by SVC_GATEWAY_SSH_* variables: a
 * VM on test:///default gets its local sshd (SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH, _AUTHORIZED_USER,
 * _AUTHORIZED_PRINCIPALS), the connector (SVC_GATEWAY_SSH_LISTEN, _ALLOWLIST) finds it by the VM's
 * name, the real ssh logs in through `sbx ssh-proxy`, the session lands in the credential audit,
 * and stopping the VM takes its sshd away. The lease check is the `sshLeaseCheck` service, as the
 * SSH lease component provides it (here a component with a fixed set of leases).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pino from 'pino';
import type { Component } from '../../src/component/component.js';
import { ensureCa, issueOperatorCert } from '../../src/identity/ca.js';
import { DEFAULT_COMPONENTS, startServer, type ServerHandle } from '../../src/main.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { runProgram } from '../support/run-program.js';
import { kBatchSsh } from '../support/ssh-options.js';

const execFileAsync = promisify(execFile);
const SBX_BIN = fileURLToPath(new URL('../../src/bin/sbx.js', import.meta.url));
const LOGIN_USER = userInfo().username;
const VM = `agent-sshc-${Math.random().toString(36).slice(2, 7)}`;

/** Provides `sshLeaseCheck`: alice holds a lease for the VM. */
const leasesComponent: Component = {
  name: 'test-ssh-leases',
  start(ctx) {
    ctx.provide('sshLeaseCheck', (actor, instance) => (actor === 'alice' && instance === VM ? { id: 'sshlease_test' } : undefined));
    return Promise.resolve({ stop: () => Promise.resolve() });
  },
};

void describe('SSH connector in the server, configured by SVC_GATEWAY_SSH_*', () => {
  let dir: string;
  let server: ServerHandle;
  let base: string;
  let port: number;
  let secretsDir: string;

  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const res = await fetch(base + path, {
      method,
      ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };

  const waitOp = (id: string): Promise<Record<string, unknown>> =>
    waitFor(
      `operation ${id}`,
      async () => {
        const op = (await call('GET', `/api/v1/operations/${id}`)).json;
        return op['status'] === 'completed' || op['status'] === 'failed' ? op : undefined;
      },
      { deadlineMs: DEADLINE_MS.agent, intervalMs: 100 },
    );

  async function ssh(
    principalCert: string,
    actor: string,
    command: string,
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const proxy = `${process.execPath} ${SBX_BIN} ssh-proxy --connect 127.0.0.1:${port} --actor ${actor} ${VM}`;
    return runProgram('ssh', [
      ...kBatchSsh,
      '-i',
      join(dir, 'user'),
      '-o',
      `CertificateFile=${principalCert}`,
      '-o',
      'IdentitiesOnly=yes',
      '-o',
      'LogLevel=ERROR',
      '-o',
      `ProxyCommand=${proxy}`,
      '-l',
      LOGIN_USER,
      VM,
      command,
    ]);
  }

  async function sign(label: string, principal: string): Promise<string> {
    const pub = join(dir, `${label}.pub`);
    await copyFile(join(dir, 'user.pub'), pub);
    await execFileAsync('ssh-keygen', ['-q', '-s', join(dir, 'ca'), '-I', label, '-n', principal, '-V', '-1m:+10m', pub]);
    return join(dir, `${label}-cert.pub`);
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sbx-sshc-'));
    await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'ca')]);
    await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'user')]);
    // The leases go in right before the connector, which looks them up when it starts.
    const at = DEFAULT_COMPONENTS.findIndex((c) => c.name === 'ssh-connector');
    assert.ok(at >= 0, 'the default components include the SSH connector');
    const components = [...DEFAULT_COMPONENTS.slice(0, at), leasesComponent, ...DEFAULT_COMPONENTS.slice(at)];
    const config = loopbackConfig(join(dir, 'state'), {
      SVC_ACTOR_SHARDS: '1',
      SVC_SHUTDOWN_DEADLINE_MS: '8000',
      SVC_GATEWAY_SSH_LISTEN: '127.0.0.1:0',
      SVC_GATEWAY_SSH_ALLOWLIST: 'alice=*,bob=*',
      SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH: join(dir, 'ca.pub'),
      SVC_GATEWAY_SSH_AUTHORIZED_USER: LOGIN_USER,
      SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS: 'agent ops',
    });
    secretsDir = config.secretsDir;
    server = await startServer(config, pino({ level: 'silent' }), { components });
    base = `http://127.0.0.1:${server.ports.http}`;
    port = server.service('sshConnector').port;
  });

  after(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  void test("a VM's local sshd takes a certificate for a configured principal through the connector", async () => {
    const created = await call('POST', '/api/v1/vms', { name: VM });
    assert.equal(created.status, 202, JSON.stringify(created.json));
    const op = await waitOp((created.json['operation'] as { id: string }).id);
    assert.equal(op['status'], 'completed', JSON.stringify(op));
    const ok = await ssh(await sign('ops', 'ops'), 'alice', 'echo VM_LOGIN_OK');
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout.trim(), 'VM_LOGIN_OK');
    // A principal outside SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS is refused by the VM's sshd.
    const wrong = await ssh(await sign('root', LOGIN_USER === 'agent' ? 'nobody' : LOGIN_USER), 'alice', 'echo NO');
    assert.equal(wrong.code, 255);
    // bob is allowlisted but holds no lease.
    const noLease = await ssh(await sign('bob', 'ops'), 'bob', 'echo NO');
    assert.match(noLease.stderr, /ssh\.lease_required/);
  });

  void test('the credential audit shows the sessions, without details', async () => {
    const { json } = await call('GET', `/api/v2/credentials/audit?date=${new Date().toISOString().slice(0, 10)}`);
    const records = json['records'] as {
      action: string;
      outcome: string;
      actor: string;
      reason_code: string | null;
      resource: { lease_id: string };
    }[];
    assert.ok(
      records.some(
        (r) =>
          r.action === 'gateway_ssh_session.open' &&
          r.outcome === 'allowed' &&
          r.actor === 'alice' &&
          r.resource.lease_id === 'sshlease_test',
      ),
    );
    assert.ok(records.some((r) => r.action === 'gateway_ssh_session.close' && r.actor === 'alice'));
    assert.ok(
      records.some(
        (r) =>
          r.action === 'gateway_ssh_session.open' && r.outcome === 'denied' && r.reason_code === 'ssh.lease_required' && r.actor === 'bob',
      ),
    );
  });

  void test('stopping the VM stops its sshd: the connector refuses with ssh.no_endpoint', async () => {
    const stopped = await call('POST', `/api/v1/vms/${VM}/stop`);
    assert.equal(stopped.status, 200, JSON.stringify(stopped.json));
    await waitFor(
      `VM ${VM} to be down`,
      async () => ((await call('GET', `/api/v1/vms/${VM}`)).json['state'] === 'running' ? undefined : true),
      { deadlineMs: DEADLINE_MS.agent, intervalMs: 100 },
    );
    const r = await ssh(await sign('after', 'ops'), 'alice', 'echo NO');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /ssh\.no_endpoint/);
  });

  void test('sbx reaches the admin listener as an operator with SBX_OPERATOR_CERTS (lease requests need it)', async () => {
    const ca = await ensureCa({ secretsDir, trustDomain: server.config.trustDomain });
    const cert = await issueOperatorCert(ca, { name: 'alice' });
    const certs = join(dir, 'alice');
    await mkdir(certs, { mode: 0o700 });
    await writeFile(join(certs, 'ca.pem'), ca.caCertPem);
    await writeFile(join(certs, 'operator.pem'), cert.certPem);
    await writeFile(join(certs, 'operator-key.pem'), cert.keyPem, { mode: 0o600 });
    const args = [SBX_BIN, 'cred', 'list', '--json', '--server', `https://127.0.0.1:${server.ports.admin}`];
    const home = { HOME: dir, XDG_CONFIG_HOME: dir };
    const ok = await runProgram(process.execPath, args, { ...home, SBX_OPERATOR_CERTS: certs });
    assert.equal(ok.code, 0, ok.stderr);
    assert.deepEqual(JSON.parse(ok.stdout), []);
    const without = await runProgram(process.execPath, args, home);
    assert.notEqual(without.code, 0);
  });
});
