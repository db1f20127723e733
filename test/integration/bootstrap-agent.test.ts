/**
 * The sandbox-agent binary's --bootstrap-token-file path against a real sandboxd (CA, token store,
 * HTTP listener, mTLS gRPC listener): over https through a relay whose certificate sandboxd's CA
 * issued, the agent verifies it with the material's CA, enrolls, writes its bundle and registers;
 * a relay with another CA's certificate is refused at once (exit 2, bootstrap.server_untrusted)
 * and the token stays usable; a token someone else used is refused with exit 2 and
 * bootstrap.token_consumed. No output ever holds the token.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { authComponent } from '../../src/auth/component.js';
import { bootstrapComponent } from '../../src/bootstrap/component.js';
import { eventsComponent } from '../../src/events/component.js';
import { buildCsrPem } from '../../src/guest-agent/csr.js';
import { createStandaloneCa, ensureCa, type CaMaterial } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { actorsComponent, httpComponent } from '../../src/server/runtime-components.js';
import { DEFAULT_AGENT_BIN } from '../../src/vms/local-agents.js';
import type { BootstrapMaterial } from '../../src/wire/bootstrap.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

interface RunningAgent {
  readonly child: ChildProcess;
  output(): string;
  readonly exited: Promise<number | null>;
}

describe('sandbox-agent --bootstrap-token-file', () => {
  let dir: string;
  let server: ServerHandle;
  let ca: CaMaterial;
  const relays: Server[] = [];
  const agents: ChildProcess[] = [];

  /** An https server relaying POSTs to sandboxd's HTTP listener, with this certificate. */
  async function relay(certPem: string, keyPem: string): Promise<number> {
    const srv = createServer({ cert: certPem, key: keyPem }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void fetch(`http://127.0.0.1:${server.ports.http}${req.url ?? '/'}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: Buffer.concat(chunks),
        }).then(async (r) => {
          res.writeHead(r.status, { 'content-type': 'application/json' });
          res.end(await r.text());
        });
      });
    });
    relays.push(srv);
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const addr = srv.address();
    assert.ok(addr !== null && typeof addr === 'object');
    return addr.port;
  }

  /** Stages material for `instanceId` in a work folder of its own; `consumeUrl` rewrites where it points. */
  async function stageIn(instanceId: string, consumeUrl?: string): Promise<{ work: string; file: string; m: BootstrapMaterial }> {
    const work = join(dir, instanceId);
    await mkdir(work, { recursive: true });
    const file = join(work, 'boot', 'material.json');
    await server.service('bootstrap').stage({ instanceId, agentId: `agent-${instanceId}`, file });
    const m = JSON.parse(await readFile(file, 'utf8')) as BootstrapMaterial;
    if (consumeUrl !== undefined) await writeFile(file, JSON.stringify({ ...m, consume_url: consumeUrl }), { mode: 0o600 });
    return { work, file, m };
  }

  function runAgent(work: string, file: string): RunningAgent {
    const child = spawn(
      process.execPath,
      [
        DEFAULT_AGENT_BIN,
        '--server',
        `127.0.0.1:${server.ports.grpc}`,
        '--certs',
        join(work, 'certs'),
        '--bootstrap-token-file',
        file,
        '--work-dir',
        work,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    agents.push(child);
    let out = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    return { child, output: () => out, exited };
  }

  const consumeUrlAt = (port: number) => `https://localhost:${port}/api/v1/bootstrap-enrollment/consume`;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-bootstrap-agent-'));
    const config = loopbackConfig(dir, { SVC_ACTORS: 'workers', SVC_ACTOR_SHARDS: '1' });
    server = await startServer(config, pino({ level: 'silent' }), {
      components: [
        authComponent,
        eventsComponent(),
        actorsComponent,
        agentsComponent,
        httpComponent,
        bootstrapComponent(),
        agentListenerComponent,
      ],
    });
    ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
  });

  after(async () => {
    for (const a of agents) a.kill('SIGKILL');
    for (const r of relays) r.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('over https verified with the material CA: enrolls, writes its bundle, registers with the fresh identity', async () => {
    const port = await relay(ca.serverCertPem, ca.serverKeyPem);
    const { work, file, m } = await stageIn('inst-https', consumeUrlAt(port));
    const agent = runAgent(work, file);
    await waitFor(
      'the enrolled agent to register',
      () => {
        const a = server.agents.registry.get('agent-inst-https');
        return a !== undefined && a.instance_id === 'inst-https' && a.status !== 'Disconnected';
      },
      { deadlineMs: DEADLINE_MS.agent, intervalMs: 50, lastState: () => agent.output() },
    );
    const cert = new X509Certificate(await readFile(join(work, 'certs', 'agent.pem')));
    assert.equal(cert.subjectAltName, 'URI:spiffe://sandbox.local/agent/inst-https');
    assert.equal((await stat(join(work, 'certs', 'agent-key.pem'))).mode & 0o777, 0o600);
    assert.equal(await readFile(join(work, 'certs', 'ca.pem'), 'utf8'), ca.caCertPem);
    assert.ok(!existsSync(file), 'the material is deleted');
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0);
    assert.ok(!agent.output().includes(m.token), 'the agent logged its token');

    // Started again with the same flags, the material gone: it uses the bundle it wrote.
    const again = runAgent(work, file);
    await waitFor(
      'the agent to register again from its bundle',
      () => {
        const a = server.agents.registry.get('agent-inst-https');
        return a !== undefined && a.status !== 'Disconnected' ? a : undefined;
      },
      { deadlineMs: DEADLINE_MS.agent, intervalMs: 50, lastState: () => again.output() },
    );
    again.child.kill('SIGTERM');
    assert.equal(await again.exited, 0, again.output());
  });

  test('an https server another CA vouches for is refused at once: exit 2, bootstrap.server_untrusted, token unspent', async () => {
    const foreign = await createStandaloneCa('sandbox.local');
    const port = await relay(foreign.serverCertPem, foreign.serverKeyPem);
    const { work, file, m } = await stageIn('inst-foreign', consumeUrlAt(port));
    const agent = runAgent(work, file);
    assert.equal(await agent.exited, 2, agent.output());
    assert.match(agent.output(), /bootstrap\.server_untrusted/);
    assert.ok(!agent.output().includes(m.token));
    assert.ok(existsSync(file));
    const later = await fetch(`http://127.0.0.1:${server.ports.http}/api/v1/bootstrap-enrollment/consume`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: m.token, csr: buildCsrPem(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, 'x') }),
    });
    assert.equal(later.status, 200, 'the token was not spent on the untrusted server');
  });

  test('a token someone else used: exit 2 with bootstrap.token_consumed in the log and without the token', async () => {
    const { work, file, m } = await stageIn('inst-refused');
    const csr = buildCsrPem(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, 'x');
    const first = await fetch(m.consume_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: m.token, csr }),
    });
    assert.equal(first.status, 200, 'someone else used the token first');
    const agent = runAgent(work, file);
    assert.equal(await agent.exited, 2, agent.output());
    assert.match(agent.output(), /bootstrap\.token_consumed/);
    assert.match(agent.output(), /"instanceId":"inst-refused"/, 'the identity came from the material');
    assert.ok(!agent.output().includes(m.token), 'the agent logged its token');
    assert.ok(existsSync(file), 'a refused material file is left for the operator to inspect');
  });
});
