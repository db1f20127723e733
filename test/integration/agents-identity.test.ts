/**
 * Every identity rule of the gRPC listener (spec part 5, issue 3 item 2), against the real
 * server: only mTLS with a certificate from sandboxd's CA gets in; the agent certificate's
 * instance id must equal x-agent-instance-id; the retired x-agent-secret is refused; Exec is an
 * operator call.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createServer as createTlsServer } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { createStandaloneCa, issueAgentCert, issueOperatorCert } from '../../src/identity/ca.js';
import { AGENT_NODE_OPTIONS } from '../../src/image/guest-init.js';
import {
  agentCerts,
  agentOf,
  execCollect,
  grpcClient,
  killAll,
  openConnect,
  operatorClient,
  registration,
  spawnAgent,
  startTestServer,
  waitForStatus,
  type AgentProcess,
  type TestServer,
} from './agents-harness.js';

const DAY_MS = 86_400_000;

void describe('gRPC identity', () => {
  let ts: TestServer;
  const procs: AgentProcess[] = [];
  const clients: grpc.Client[] = [];
  before(async () => {
    ts = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '7' });
    const certs = await agentCerts(ts, 'i-id-real');
    procs.push(spawnAgent({ server: ts.grpcTarget, certs, agentId: 'agent-id-real', instanceId: 'i-id-real', workDir: ts.dir }));
    await waitForStatus(ts, 'agent-id-real', 'Ready');
  });
  after(async () => {
    for (const c of clients) c.close();
    await killAll(procs);
    await ts.stop();
  });

  function track(c: grpc.Client): grpc.Client {
    clients.push(c);
    return c;
  }

  /** Opens Connect with `client`, sends a registration, and returns the final status and what came back. */
  async function tryConnect(
    client: grpc.Client,
    md: Record<string, string>,
    agentId: string,
    instanceId: string,
  ): Promise<{ code: number; details: string; payloads: string[] }> {
    const stream = openConnect(track(client), md);
    stream.send(registration(agentId, instanceId));
    const status = await stream.status;
    return { code: status.code, details: status.details, payloads: stream.messages.map((m) => String(m.payload)) };
  }

  const md = (agentId: string, instanceId: string): Record<string, string> => ({
    'x-agent-id': agentId,
    'x-agent-instance-id': instanceId,
  });

  void test('plain TCP (no TLS) is refused', async () => {
    const out = await tryConnect(
      new grpc.Client(ts.grpcTarget, grpc.credentials.createInsecure()),
      md('agent-plain', 'i-plain'),
      'agent-plain',
      'i-plain',
    );
    assert.equal(out.code, grpc.status.UNAVAILABLE);
    assert.deepEqual(out.payloads, []);
    assert.equal(await agentOf(ts, 'agent-plain'), undefined);
  });

  void test('a client without a certificate is refused', async () => {
    const out = await tryConnect(grpcClient(ts, null), md('agent-nocert', 'i-nocert'), 'agent-nocert', 'i-nocert');
    assert.equal(out.code, grpc.status.UNAVAILABLE);
    assert.deepEqual(out.payloads, []);
    assert.equal(await agentOf(ts, 'agent-nocert'), undefined);
  });

  void test('a certificate from another CA is refused', async () => {
    const foreign = await createStandaloneCa(ts.config.trustDomain);
    const cert = await issueAgentCert(foreign, { instanceId: 'i-foreign' });
    const out = await tryConnect(grpcClient(ts, cert), md('agent-foreign', 'i-foreign'), 'agent-foreign', 'i-foreign');
    assert.equal(out.code, grpc.status.UNAVAILABLE);
    assert.equal(await agentOf(ts, 'agent-foreign'), undefined);
  });

  void test('an expired certificate is refused', async () => {
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-expired', now: new Date(Date.now() - 2 * DAY_MS), ttlSeconds: 3600 });
    const out = await tryConnect(grpcClient(ts, cert), md('agent-expired', 'i-expired'), 'agent-expired', 'i-expired');
    assert.equal(out.code, grpc.status.UNAVAILABLE);
    assert.equal(await agentOf(ts, 'agent-expired'), undefined);
  });

  void test('the retired x-agent-secret header is refused (UNAUTHENTICATED) even with a valid certificate', async () => {
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-secret' });
    const out = await tryConnect(
      grpcClient(ts, cert),
      { ...md('agent-secret', 'i-secret'), 'x-agent-secret': 'hunter2' },
      'agent-secret',
      'i-secret',
    );
    assert.equal(out.code, grpc.status.UNAUTHENTICATED);
    assert.match(out.details, /x-agent-secret is retired/);
    assert.equal(await agentOf(ts, 'agent-secret'), undefined);
  });

  void test('a certificate instance id different from x-agent-instance-id is PERMISSION_DENIED', async () => {
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-one' });
    const out = await tryConnect(grpcClient(ts, cert), md('agent-mismatch', 'i-two'), 'agent-mismatch', 'i-two');
    assert.equal(out.code, grpc.status.PERMISSION_DENIED);
    assert.match(out.details, /does not match/);
    assert.equal(await agentOf(ts, 'agent-mismatch'), undefined);
  });

  void test('a registration naming another instance or agent is PERMISSION_DENIED', async () => {
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-reg' });
    const wrongInstance = await tryConnect(grpcClient(ts, cert), md('agent-reg', 'i-reg'), 'agent-reg', 'i-other');
    assert.equal(wrongInstance.code, grpc.status.PERMISSION_DENIED);
    assert.ok(!wrongInstance.payloads.includes('registrationAck'));
    const wrongAgent = await tryConnect(grpcClient(ts, cert), md('agent-reg', 'i-reg'), 'agent-impostor', 'i-reg');
    assert.equal(wrongAgent.code, grpc.status.PERMISSION_DENIED);
    assert.equal(await agentOf(ts, 'agent-reg'), undefined);
    assert.equal(await agentOf(ts, 'agent-impostor'), undefined);
  });

  void test('an operator certificate cannot Connect as an agent, and x-agent-id is required', async () => {
    const op = await issueOperatorCert(ts.ca, { name: 'bob' });
    const asAgent = await tryConnect(grpcClient(ts, op), md('agent-op', 'bob'), 'agent-op', 'bob');
    assert.equal(asAgent.code, grpc.status.PERMISSION_DENIED);
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-noid' });
    const noId = await tryConnect(grpcClient(ts, cert), { 'x-agent-instance-id': 'i-noid' }, 'agent-noid', 'i-noid');
    assert.equal(noId.code, grpc.status.INVALID_ARGUMENT);
  });

  /** The minimal guest's agent: its node options, and no CA store of OpenSSL's own (the image has none). */
  const guestTrust = {
    nodeOptions: AGENT_NODE_OPTIONS,
    env: { SSL_CERT_FILE: '/nonexistent/cert.pem', SSL_CERT_DIR: '/nonexistent/certs', NODE_EXTRA_CA_CERTS: undefined },
  };

  void test("the agent run as the minimal guest runs it (its node options, no OpenSSL CA store) registers with sandboxd's CA alone", async () => {
    const certs = await agentCerts(ts, 'i-guest-opts');
    const agent = spawnAgent({ server: ts.grpcTarget, certs, agentId: 'agent-guest-opts', instanceId: 'i-guest-opts', ...guestTrust });
    procs.push(agent);
    await waitForStatus(ts, 'agent-guest-opts', 'Ready');
  });

  void test('that agent still refuses a server whose certificate another CA signed', async () => {
    const other = await createStandaloneCa('other.example');
    let handshakes = 0;
    let refusals = 0;
    const impostor = createTlsServer(
      { cert: other.serverCertPem, key: other.serverKeyPem, requestCert: true, rejectUnauthorized: false, ALPNProtocols: ['h2'] },
      (socket) => {
        handshakes += 1;
        socket.destroy();
      },
    );
    impostor.on('tlsClientError', () => (refusals += 1));
    impostor.listen(0, '127.0.0.1');
    await once(impostor, 'listening');
    const certs = await agentCerts(ts, 'i-impostor');
    const agent = spawnAgent({
      server: `127.0.0.1:${(impostor.address() as AddressInfo).port}`,
      certs,
      agentId: 'agent-impostor',
      instanceId: 'i-impostor',
      ...guestTrust,
    });
    procs.push(agent);
    try {
      // The agent dials, refuses the certificate, backs off (at most 1 s here) and dials again.
      const deadline = Date.now() + 30_000;
      while (refusals + handshakes < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.equal(handshakes, 0, 'the agent completed a TLS handshake with the impostor');
      assert.ok(refusals >= 2, `the agent dialled the impostor ${refusals} time(s) in 30 s; its log: ${agent.log().slice(-2000)}`);
      assert.doesNotMatch(agent.log(), /"msg":"registered"/);
    } finally {
      agent.kill();
      impostor.close();
    }
  });

  void test('a valid agent certificate and metadata register: the ack carries the configured heartbeat interval', async () => {
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-good' });
    const stream = openConnect(track(grpcClient(ts, cert)), md('agent-good', 'i-good'));
    stream.send(registration('agent-good', 'i-good'));
    const ack = await stream.next((m) => m.payload === 'registrationAck');
    assert.equal(ack.registrationAck?.accepted, true);
    assert.equal(ack.registrationAck?.heartbeatIntervalSeconds, 7);
    assert.ok(Math.abs(Number(ack.registrationAck?.serverTimeMs) - Date.now()) < 60_000);
    const query = await stream.next((m) => m.payload === 'sessionQuery');
    assert.equal(query.sessionQuery?.reportAll, true);
    await waitForStatus(ts, 'agent-good', 'Starting');
    stream.call.end();
    await stream.status;
  });

  void test('a new stream of the same agent supersedes the old one (ABORTED); the agent stays listed once', async () => {
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-twice' });
    const first = openConnect(track(grpcClient(ts, cert)), md('agent-twice', 'i-twice'));
    first.send(registration('agent-twice', 'i-twice'));
    await first.next((m) => m.payload === 'registrationAck');
    const second = openConnect(track(grpcClient(ts, cert)), md('agent-twice', 'i-twice'));
    second.send(registration('agent-twice', 'i-twice'));
    await second.next((m) => m.payload === 'registrationAck');
    const firstStatus = await first.status;
    assert.equal(firstStatus.code, grpc.status.ABORTED);
    assert.match(firstStatus.details, /superseded/);
    second.send({ heartbeat: { agentId: 'agent-twice', status: 2 } });
    await waitForStatus(ts, 'agent-twice', 'Ready');
    const { body } = await ts.getJson<{ agents: { id: string }[] }>('/api/v1/agents');
    assert.equal(body.agents.filter((a) => a.id === 'agent-twice').length, 1);
    second.call.end();
    await second.status;
  });

  void test('Exec with an agent certificate is PERMISSION_DENIED', async () => {
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-id-real' });
    const out = await execCollect(track(grpcClient(ts, cert)), { agentId: 'agent-id-real', command: 'echo', args: ['no'] });
    assert.equal(out.status.code, grpc.status.PERMISSION_DENIED);
    assert.match(out.status.details, /operator/);
    assert.equal(out.items.length, 0);
  });

  void test('Exec without a client certificate fails the handshake', async () => {
    const out = await execCollect(track(grpcClient(ts, null)), { agentId: 'agent-id-real', command: 'echo', args: ['no'] });
    assert.equal(out.status.code, grpc.status.UNAVAILABLE);
  });

  void test('Exec with an operator certificate runs the command', async () => {
    const out = await execCollect(track(await operatorClient(ts)), {
      agentId: 'agent-id-real',
      command: 'sh',
      args: ['-c', 'echo out; echo err >&2; exit 3'],
    });
    assert.equal(out.status.code, grpc.status.OK, out.status.details);
    assert.equal(out.stdout.toString(), 'out\n');
    assert.equal(out.stderr.toString(), 'err\n');
    assert.equal(out.final?.complete, true);
    assert.equal(out.final?.exitCode, 3);
    assert.equal(out.items.at(-1), out.final, 'the complete item is the last one');
  });
});
