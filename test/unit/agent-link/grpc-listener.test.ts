/**
 * The agent listener's TLS, with a real client on loopback: an agent certificate is accepted
 * (TLS 1.3, ALPN h2), a client without a certificate is refused, and a session from an earlier
 * connection is not resumed: every connection makes a full handshake with its certificate
 * (stateless session tickets cost memory per connected agent, and agents never resume).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';
import { startGrpcListener, type GrpcListener } from '../../../src/agent-link/grpc-server.js';
import { parseListenAddress } from '../../../src/config/parsers.js';
import { ensureCa, issueAgentCert, type CaMaterial, type IssuedCert } from '../../../src/identity/ca.js';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };
/** The HTTP/2 client connection preface and an empty SETTINGS frame. */
const kPreface = Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])]);

let dir: string;
let ca: CaMaterial;
let agent: IssuedCert;
let listener: GrpcListener;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sandboxd-grpc-listener-'));
  ca = await ensureCa({ secretsDir: dir, trustDomain: 'sandbox.local' });
  agent = await issueAgentCert(ca, { instanceId: 'i-listener' });
  listener = await startGrpcListener({
    address: parseListenAddress('127.0.0.1:0'),
    ca,
    logger: silent,
    handlers: { connect: (call) => call.end(), exec: (call) => call.end() },
  });
});

after(async () => {
  await listener.close(100);
  await rm(dir, { recursive: true, force: true });
});

interface Seen {
  protocol: string | null;
  alpn: string | false | null;
  reused: boolean;
  /** The last TLS session the server handed out (NewSessionTicket), if any. */
  session: Buffer | undefined;
  /** Bytes the server sent after the handshake (its HTTP/2 SETTINGS at least). */
  firstData: number;
}

/** Handshakes, sends the HTTP/2 preface and waits for the server's first frame: by then any ticket has arrived. */
function handshake(cert: IssuedCert | null, session?: Buffer): Promise<Seen> {
  return new Promise((resolve, reject) => {
    let last: Buffer | undefined;
    let reused = false;
    const socket = tls.connect({
      host: '127.0.0.1',
      port: listener.port,
      servername: 'localhost',
      ca: ca.caCertPem,
      ALPNProtocols: ['h2'],
      ...(cert === null ? {} : { cert: cert.certPem, key: cert.keyPem }),
      ...(session === undefined ? {} : { session }),
    });
    socket.on('session', (s: Buffer) => (last = s));
    socket.once('secureConnect', () => {
      reused = socket.isSessionReused();
      socket.write(kPreface);
    });
    socket.once('data', (b: Buffer) => {
      const seen: Seen = { protocol: socket.getProtocol(), alpn: socket.alpnProtocol, reused, session: last, firstData: b.byteLength };
      socket.destroy();
      resolve(seen);
    });
    socket.once('error', (err: Error) => {
      socket.destroy();
      reject(err);
    });
    socket.once('close', () => reject(new Error('closed before the server sent anything')));
  });
}

describe('agent listener TLS', () => {
  test('an agent certificate gets TLS 1.3 with h2; its session is not resumed on the next connection', async () => {
    const first = await handshake(agent);
    assert.equal(first.protocol, 'TLSv1.3');
    assert.equal(first.alpn, 'h2');
    assert.ok(first.firstData > 0);
    assert.equal(first.reused, false);
    assert.ok(first.session !== undefined, 'no TLS session to offer back');
    const second = await handshake(agent, first.session);
    assert.equal(second.reused, false, 'the listener resumed a TLS session (stateless tickets are on)');
    assert.ok(second.firstData > 0);
  });

  test('a client without a certificate is refused', async () => {
    await assert.rejects(handshake(null));
  });
});
