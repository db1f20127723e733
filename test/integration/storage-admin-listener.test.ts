/**
 * Scoped storage and streamed downloads on the admin listener (HTTPS with mutual TLS, node's
 * http server: the other streaming path of src/http), with real operator certificates: an
 * operator requests, an admin approves, nobody approves their own write; a download streams
 * byte-identical while the client pauses; a client that hangs up mid-download leaves no open file.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { request, type RequestOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { ensureCa, issueOperatorCert, type CaMaterial, type IssuedCert } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

/** Open descriptors of this process (the server runs in it) that point at `path`. */
function openFds(path: string): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === path) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

describe('scoped storage on the admin listener', () => {
  let dir: string;
  let server: ServerHandle;
  let ca: CaMaterial;
  const certs: Record<string, IssuedCert> = {};
  const big = randomBytes(8 * 1024 * 1024);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-storage-admin-'));
    writeFileSync(join(dir, 'roles.json'), JSON.stringify({ ada: 'admin', ben: 'admin', olga: 'operator' }));
    mkdirSync(join(dir, 'storage', 'global'), { recursive: true });
    writeFileSync(join(dir, 'storage', 'global', 'big.bin'), big);
    const config = loopbackConfig(dir, { SVC_OPERATOR_ROLES: join(dir, 'roles.json'), SVC_ACTOR_SHARDS: '1' });
    server = await startServer(config, pino({ level: 'silent' }));
    ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    for (const name of ['ada', 'ben', 'olga']) certs[name] = await issueOperatorCert(ca, { name });
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const opts = (who: string, method: string, path: string, extra: Partial<RequestOptions> = {}): RequestOptions => ({
    host: '127.0.0.1',
    port: server.ports.admin,
    path,
    method,
    ca: ca.caCertPem,
    cert: certs[who]?.certPem,
    key: certs[who]?.keyPem,
    agent: false,
    ...extra,
  });
  const call = (who: string, method: string, path: string, body?: string): Promise<{ status: number; text: string }> =>
    new Promise((resolve, reject) => {
      const req = request(opts(who, method, path), (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.end(body);
    });
  const idOf = (text: string): string => (JSON.parse(text) as { review: { id: string } }).review.id;

  test('an operator requests, a second identity approves', async () => {
    const O = '/api/v2/storage/inbox/agent-adm';
    const put = await call('olga', 'PUT', `${O}/objects/a.txt`, 'from olga');
    assert.equal(put.status, 202, put.text);
    assert.equal((await call('olga', 'POST', `/api/v2/storage/reviews/${idOf(put.text)}/approve`)).status, 403);
    assert.equal((await call('ada', 'POST', `/api/v2/storage/reviews/${idOf(put.text)}/approve`)).status, 200);
    const own = await call('ada', 'PUT', `${O}/objects/b.txt`, 'from ada');
    const self = await call('ada', 'POST', `/api/v2/storage/reviews/${idOf(own.text)}/approve`);
    assert.equal(self.status, 403);
    assert.match(self.text, /storage\.review_self/u);
    assert.equal((await call('ben', 'POST', `/api/v2/storage/reviews/${idOf(own.text)}/approve`)).status, 200);
    const got = await call('olga', 'GET', `${O}/objects/b.txt`);
    assert.equal(got.text, 'from ada');
  });

  test('a download streams byte-identical while the client pauses', async () => {
    const got = await new Promise<{ status: number; length: string | undefined; sha: string }>((resolve, reject) => {
      const req = request(opts('olga', 'GET', '/api/v1/storage/global/_download?path=big.bin'), (res: IncomingMessage) => {
        const h = createHash('sha256');
        let seen = 0;
        let paused = false;
        res.on('data', (d: Buffer) => {
          h.update(d);
          seen += d.byteLength;
          if (!paused && seen > 1024 * 1024) {
            paused = true; // the server's socket fills and it must wait for 'drain'
            res.pause();
            setTimeout(() => res.resume(), 200);
          }
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, length: res.headers['content-length'], sha: h.digest('hex') }));
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(got.status, 200);
    assert.equal(got.length, String(big.byteLength));
    assert.equal(got.sha, createHash('sha256').update(big).digest('hex'));
  });

  test('a client that hangs up mid-download leaves no open file behind', async () => {
    const file = join(dir, 'storage', 'global', 'big.bin');
    await new Promise<void>((resolve, reject) => {
      const req = request(opts('olga', 'GET', '/api/v1/storage/global/_download?path=big.bin'), (res) => {
        res.once('data', () => {
          assert.ok(openFds(file) >= 1, 'the server holds the file while it streams');
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.on('close', () => resolve());
      req.once('error', reject);
      req.end();
    });
    await waitFor('the download to release its file', () => (openFds(file) === 0 ? true : undefined), {
      deadlineMs: DEADLINE_MS.local,
      lastState: () => `${openFds(file)} descriptors open`,
    });
  });
});
