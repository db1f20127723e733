/**
 * Real mutual TLS on loopback with the material ensureCa makes: a node:tls server that requires
 * and verifies client certificates (as the gRPC listener does), and clients holding a valid
 * agent certificate, an operator certificate, none, a foreign CA's, and an expired one.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';
import {
  createStandaloneCa,
  ensureCa,
  issueAgentCert,
  issueOperatorCert,
  type CaMaterial,
  type IssuedCert,
} from '../../../src/identity/ca.js';
import { checkAgentMetadata, identityFromPeerCertificate, type PeerIdentity } from '../../../src/identity/spiffe.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const TD = 'sandbox.local';
const DAY_MS = 86_400_000;

type Outcome = { accepted: true; identity: PeerIdentity | null; authorized: boolean } | { accepted: false; error: string };

let secrets: string;
let ca: CaMaterial;
let server: tls.Server;
let port: number;

before(async () => {
  secrets = await mkdtemp(join(tmpdir(), 'sandboxd-mtls-'));
  ca = await ensureCa({ secretsDir: secrets, trustDomain: TD });
  server = tls.createServer({
    key: ca.serverKeyPem,
    cert: ca.serverCertPem,
    ca: ca.caCertPem,
    requestCert: true,
    rejectUnauthorized: true,
    minVersion: 'TLSv1.2',
  });
  server.on('secureConnection', (socket) => socket.end('hello\n'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(secrets, { recursive: true, force: true });
});

/** Connects with `client` credentials; the outcome is what the server saw. */
function connect(client: { key?: string; cert?: string }): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(() => reject(new Error('no handshake outcome within 20 s'))), 20_000);
    const onSecure = (socket: tls.TLSSocket): void => {
      const peer = socket.getPeerCertificate();
      finish(() => resolve({ accepted: true, identity: identityFromPeerCertificate(peer, TD), authorized: socket.authorized }));
    };
    const onClientError = (err: Error): void => finish(() => resolve({ accepted: false, error: err.message }));
    function finish(done: () => void): void {
      clearTimeout(timer);
      server.off('secureConnection', onSecure);
      server.off('tlsClientError', onClientError);
      sock.destroy();
      done();
    }
    server.on('secureConnection', onSecure);
    server.on('tlsClientError', onClientError);
    const sock = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: ca.caCertPem, ...client });
    sock.on('error', () => {
      /* the server's verdict is what the test asserts; the client just sees the connection drop */
    });
  });
}

function creds(issued: IssuedCert): { key: string; cert: string } {
  return { key: issued.keyPem, cert: issued.certPem };
}

void describe('mTLS handshake with ensureCa material', () => {
  void test('a valid agent certificate is accepted and its instance id is the identity', async () => {
    const outcome = await connect(creds(await issueAgentCert(ca, { instanceId: 'i-0001' })));
    assert.equal(outcome.accepted, true);
    assert.ok(outcome.accepted);
    assert.equal(outcome.authorized, true);
    assert.deepEqual(outcome.identity, { kind: 'agent', instanceId: 'i-0001' });
    assert.deepEqual(checkAgentMetadata(outcome.identity, { instanceId: 'i-0001' }), { ok: true });
    const mismatch = checkAgentMetadata(outcome.identity, { instanceId: 'i-9999' });
    assert.equal(mismatch.ok, false);
    assert.equal(!mismatch.ok && mismatch.code, 'agent.identity_mismatch');
  });

  void test('an operator certificate is accepted as an operator identity', async () => {
    const outcome = await connect(creds(await issueOperatorCert(ca, { name: 'alice' })));
    assert.ok(outcome.accepted);
    assert.deepEqual(outcome.identity, { kind: 'operator', name: 'alice' });
  });

  void test('a client without a certificate fails the handshake', async () => {
    const outcome = await connect({});
    assert.equal(outcome.accepted, false);
  });

  void test('a certificate from another CA fails the handshake', async () => {
    const foreign = await createStandaloneCa(TD);
    const outcome = await connect(creds(await issueAgentCert(foreign, { instanceId: 'i-0001' })));
    assert.equal(outcome.accepted, false);
  });

  void test('an expired certificate fails the handshake', async () => {
    const expired = await issueAgentCert(ca, { instanceId: 'i-0001', now: new Date(Date.now() - 2 * DAY_MS), ttlSeconds: 3600 });
    // Node destroys the socket after verification fails (no "expired" text reaches the server's
    // tlsClientError); the certificate differs from the accepted one above only in its dates.
    const outcome = await connect(creds(expired));
    assert.equal(outcome.accepted, false);
  });

  void test('a certificate that is not yet valid fails the handshake', async () => {
    const future = await issueAgentCert(ca, { instanceId: 'i-0001', now: new Date(Date.now() + 2 * DAY_MS) });
    const outcome = await connect(creds(future));
    assert.equal(outcome.accepted, false);
  });

  void test('a chain-valid certificate of another trust domain yields no identity', async () => {
    // Same CA, other trust domain: TLS accepts it, identity parsing must not.
    const otherDomain = await ensureCa({ secretsDir: secrets, trustDomain: 'other.example' });
    const outcome = await connect(creds(await issueAgentCert(otherDomain, { instanceId: 'i-0001' })));
    assert.ok(outcome.accepted);
    assert.equal(outcome.identity, null);
    const check = checkAgentMetadata(outcome.identity, { instanceId: 'i-0001' });
    assert.equal(!check.ok && check.code, 'agent.unauthenticated');
  });

  void test('the server certificate verifies for localhost, 127.0.0.1 and ::1', async () => {
    const sock = tls.connect({
      host: '127.0.0.1',
      port,
      servername: 'localhost',
      ca: ca.caCertPem,
      ...creds(await issueAgentCert(ca, { instanceId: 'i-2' })),
    });
    const peer = await new Promise<tls.PeerCertificate>((resolve, reject) => {
      sock.once('secureConnect', () => resolve(sock.getPeerCertificate()));
      sock.once('error', reject);
    });
    assert.equal(sock.authorized, true);
    sock.destroy();
    for (const host of ['localhost', '127.0.0.1', '::1']) assert.equal(tls.checkServerIdentity(host, peer), undefined, host);
    assert.ok(tls.checkServerIdentity('example.com', peer) instanceof Error);
    assert.deepEqual(identityFromPeerCertificate(peer, TD), { kind: 'server' });
  });
});
