/**
 * The built dashboard through the real HTTP listener (no browser): the page, every asset it
 * names decoding to the bytes on disk under each content coding, HEAD, the config route, and raw
 * request paths that try to leave the assets folder.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_DASHBOARD_DIR } from '../../src/server/dashboard.js';
import { startDashboardServer, type DashboardServer } from './dashboard-harness.js';

/** A GET with the path sent exactly as given (fetch would normalise `..`). */
function rawGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('dashboard over HTTP', { timeout: 120_000 }, () => {
  let srv: DashboardServer;
  before(async () => {
    srv = await startDashboardServer();
  });
  after(async () => {
    await srv?.stop();
  });

  test('the page and each asset it names, byte for byte under br, gzip and identity', async () => {
    const page = await fetch(`${srv.baseUrl}/`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('cache-control'), 'no-store');
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="assets\/([^"]+)"/g)].map((m) => m[1] as string);
    assert.ok(assets.length >= 3, html);
    for (const name of assets) {
      const onDisk = await readFile(join(DEFAULT_DASHBOARD_DIR, 'assets', name));
      for (const enc of ['br', 'gzip', 'identity']) {
        const res = await fetch(`${srv.baseUrl}/assets/${name}`, { headers: { 'accept-encoding': enc } });
        assert.equal(res.status, 200, name);
        assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
        const body = Buffer.from(await res.arrayBuffer());
        assert.ok(body.equals(onDisk), `${name} under ${enc}`);
        if (enc !== 'identity' && onDisk.byteLength >= 1024) assert.equal(res.headers.get('content-encoding'), enc, name);
      }
    }
    const head = await fetch(`${srv.baseUrl}/`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
  });

  test('the config route names the live WS listener', async () => {
    const cfg = (await (await fetch(`${srv.baseUrl}/api/v1/dashboard/config`)).json()) as { ws_url: string };
    assert.equal(cfg.ws_url, `ws://127.0.0.1:${srv.server.ports.ws}/`);
  });

  test('paths that try to leave the assets folder get an envelope, never a file', async () => {
    for (const path of [
      '/assets/../package.json',
      '/assets/%2e%2e/package.json',
      '/assets/..%2fpackage.json',
      '/assets/%2e%2e%2f%2e%2e%2fetc%2fpasswd',
      '/assets/nope-00000000.js',
      '/assets//x',
    ]) {
      const r = await rawGet(srv.server.ports.http, path);
      assert.ok([400, 404].includes(r.status), `${path}: ${r.status}`);
      assert.match(r.body, /"error":\{"code":"(route\.not_found|request\.invalid)"/, path);
      assert.doesNotMatch(r.body, /"name": "sandboxd"|root:/, path);
    }
  });
});
