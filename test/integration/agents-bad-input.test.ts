/**
 * Bad input on the wire, through real gRPC and HTTP/2 clients: unknown oneof members, garbage
 * bytes, messages before registration, a second registration, random payloads, an oversized
 * message, broken gRPC framing and non-HTTP/2 bytes. Each is ignored with a log line and a counter
 * or refused with a status, and the server stays up (health 200, the agent stream still works).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';
import fc from 'fast-check';
import * as grpc from '@grpc/grpc-js';
import { AgentServiceMethods, v1 } from '../../proto/index.js';
import { issueAgentCert, type IssuedCert } from '../../src/identity/ca.js';
import { grpcClient, openConnect, registration, startTestServer, waitFor, waitForStatus, type TestServer } from './agents-harness.js';

async function metric(ts: TestServer, line: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${ts.server.ports.http}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? Number.NaN : Number(found.slice(line.length + 1));
}

async function healthy(ts: TestServer): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${ts.server.ports.http}/healthz`);
  assert.equal(res.status, 200);
}

/** AgentMessage with oneof member 99 (unknown to this contract): tag (99 << 3 | 2), length 0. */
const UNKNOWN_ONEOF = Buffer.from([0x9a, 0x06, 0x00]);
/** An eleven-byte varint: no protobuf decoder accepts it. */
const UNDECODABLE = Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);

const heartbeat = (agentId: string): v1.IAgentMessage => ({
  heartbeat: { agentId, timestampMs: Date.now(), status: v1.AgentStatus.READY },
});

void describe('bad input on the agent wire', () => {
  let ts: TestServer;
  const clients: grpc.Client[] = [];
  const logLines: string[] = [];
  before(async () => {
    ts = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '30' }, undefined, logLines);
  });
  after(async () => {
    for (const c of clients) c.close();
    await ts.stop();
  });

  async function agentClient(instanceId: string): Promise<{ client: grpc.Client; cert: IssuedCert }> {
    const cert = await issueAgentCert(ts.ca, { instanceId });
    const client = grpcClient(ts, cert);
    clients.push(client);
    return { client, cert };
  }

  void test('garbage, unknown oneofs and messages before registration are ignored; the stream then registers', async () => {
    const { client } = await agentClient('i-bad-1');
    const before = await metric(ts, 'svc_agent_messages_rejected_total{reason="before_registration"}');
    const stream = openConnect(client, { 'x-agent-id': 'agent-bad-1', 'x-agent-instance-id': 'i-bad-1' });
    stream.sendRaw(UNDECODABLE);
    stream.sendRaw(UNKNOWN_ONEOF);
    stream.send(heartbeat('agent-bad-1'));
    stream.send({ stdout: { streamId: 'c-1', data: Buffer.from('early'), seq: 1 } });
    stream.send(registration('agent-bad-1', 'i-bad-1'));
    const ack = await stream.next((m) => m.payload === 'registrationAck');
    assert.equal(ack.registrationAck?.accepted, true);
    await waitFor(
      'counters',
      async () => (await metric(ts, 'svc_agent_messages_rejected_total{reason="before_registration"}')) >= before + 2,
    );
    assert.ok((await metric(ts, 'svc_agent_messages_rejected_total{reason="undecodable"}')) >= 1);
    assert.ok((await metric(ts, 'svc_agent_messages_rejected_total{reason="unknown_payload"}')) >= 1);
    const ignored = logLines
      .map((l) => JSON.parse(l) as { msg?: string; reason?: string; agent?: string })
      .filter((l) => l.msg === 'agent message ignored' && l.agent === 'agent-bad-1');
    for (const reason of ['undecodable', 'unknown_payload', 'before_registration'])
      assert.ok(
        ignored.some((l) => l.reason === reason),
        `a log line for ${reason}`,
      );

    // A second registration, more garbage and unknown members: ignored, the stream stays up.
    stream.send(registration('agent-bad-1', 'i-bad-1'));
    stream.sendRaw(UNDECODABLE);
    stream.sendRaw(UNKNOWN_ONEOF);
    stream.send(heartbeat('agent-bad-1'));
    await waitForStatus(ts, 'agent-bad-1', 'Ready');
    await waitFor(
      'registration_twice counted',
      async () => (await metric(ts, 'svc_agent_messages_rejected_total{reason="registration_twice"}')) >= 1,
    );
    assert.equal(stream.messages.filter((m) => m.payload === 'registrationAck').length, 1);
    await healthy(ts);
    stream.call.end();
    assert.equal((await stream.status).code, grpc.status.OK);
  });

  void test('random payloads after registration never end the stream', async () => {
    const { client } = await agentClient('i-bad-2');
    const stream = openConnect(client, { 'x-agent-id': 'agent-bad-2', 'x-agent-instance-id': 'i-bad-2' });
    stream.send(registration('agent-bad-2', 'i-bad-2'));
    await stream.next((m) => m.payload === 'registrationAck');
    const payloads = fc.sample(fc.uint8Array({ minLength: 0, maxLength: 512 }), { numRuns: 300, seed: 20260301 });
    for (const p of payloads) stream.sendRaw(Buffer.from(p));
    for (let i = 0; i < 50; i++) stream.sendRaw(randomBytes(1 + ((i * 37) % 2000)));
    stream.send(heartbeat('agent-bad-2'));
    await waitForStatus(ts, 'agent-bad-2', 'Ready');
    await healthy(ts);
    stream.call.end();
    assert.equal((await stream.status).code, grpc.status.OK);
  });

  void test('an oversized message ends that stream with RESOURCE_EXHAUSTED; the server stays up', async () => {
    const { client } = await agentClient('i-bad-3');
    const stream = openConnect(client, { 'x-agent-id': 'agent-bad-3', 'x-agent-instance-id': 'i-bad-3' });
    stream.send(registration('agent-bad-3', 'i-bad-3'));
    await stream.next((m) => m.payload === 'registrationAck');
    stream.send({ stdout: { streamId: 'c-big', data: Buffer.alloc(4 * 1024 * 1024 + 1024, 0x61), seq: 1 } });
    const status = await stream.status;
    assert.equal(status.code, grpc.status.RESOURCE_EXHAUSTED);
    await waitForStatus(ts, 'agent-bad-3', 'Disconnected');
    await healthy(ts);
  });

  void test('broken gRPC framing over HTTP/2 is refused with a status; non-HTTP/2 bytes are dropped', async () => {
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-bad-4' });
    const session = http2.connect(`https://localhost:${ts.server.ports.grpc}`, {
      ca: ts.ca.caCertPem,
      cert: cert.certPem,
      key: cert.keyPem,
    });
    session.on('error', () => undefined);
    try {
      const req = session.request({
        ':method': 'POST',
        ':path': AgentServiceMethods.Connect.path,
        'content-type': 'application/grpc',
        te: 'trailers',
        'x-agent-id': 'agent-bad-4',
        'x-agent-instance-id': 'i-bad-4',
      });
      req.on('error', () => undefined);
      const trailers = new Promise<http2.IncomingHttpHeaders>((resolve) => {
        req.on('trailers', resolve);
        req.on('response', (h) => {
          if (h['grpc-status'] !== undefined) resolve(h);
        });
      });
      // Compressed flag set with no grpc-encoding, then a length prefix promising 1 GiB.
      req.write(Buffer.from([0x01, 0x00, 0x00, 0x00, 0x03, 0x61, 0x62, 0x63]));
      req.end(Buffer.from([0x00, 0x40, 0x00, 0x00, 0x00, 0x00]));
      const t = await trailers;
      assert.notEqual(Number(t['grpc-status']), grpc.status.OK);
    } finally {
      session.close();
    }

    const sock = tls.connect({
      host: '127.0.0.1',
      port: ts.server.ports.grpc,
      servername: 'localhost',
      ca: ts.ca.caCertPem,
      cert: cert.certPem,
      key: cert.keyPem,
      ALPNProtocols: ['h2'],
    });
    sock.on('error', () => undefined);
    await new Promise<void>((resolve) => sock.once('secureConnect', () => resolve()));
    // Consume what the server answers (a GOAWAY), or 'close' never comes.
    sock.resume();
    sock.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n this is not HTTP/2 \x00\x01\x02');
    await new Promise<void>((resolve) => sock.once('close', () => resolve()));
    await healthy(ts);
  });
});
