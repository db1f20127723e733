/**
 * src/server/dashboard.ts through the router (inject): the page, immutable hashed assets with
 * compression and ETags, path safety, the not-built answer, and the WS address for the page.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { dashboardWsUrl, pickEncoding, registerDashboardRoutes } from '../../../src/server/dashboard.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';

const JS = `console.log(${JSON.stringify('x'.repeat(4000))});\n`;

describe('dashboard routes', () => {
  let dir: string;
  let router: Router;
  const ws = { host: '127.0.0.1', port: 8121 };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dash-routes-'));
    await mkdir(join(dir, 'assets'));
    await writeFile(join(dir, 'index.html'), '<!doctype html><script type="module" src="assets/app-AAAA1111.js"></script>');
    await writeFile(join(dir, 'assets', 'app-AAAA1111.js'), JS);
    await writeFile(join(dir, 'assets', 'app-BBBB2222.css'), 'body{}');
    await writeFile(join(dir, 'assets', 'favicon-CCCC3333.svg'), '<svg/>');
    router = new Router();
    registerDashboardRoutes(router, { dir, wsAddress: () => ws });
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('GET / is the page, never cached, with a CSP naming only this server and its WS listener', async () => {
    const r = await inject(router, { method: 'GET', url: '/', headers: { host: '127.0.0.1:8122' } });
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'] ?? '', /^text\/html/);
    assert.equal(r.headers['cache-control'], 'no-store');
    assert.match(r.text, /app-AAAA1111\.js/);
    const csp = r.headers['content-security-policy'] ?? '';
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /connect-src 'self' ws:\/\/127\.0\.0\.1:8122 ws:\/\/127\.0\.0\.1:\*(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(r.headers['x-content-type-options'], 'nosniff');
  });

  test('assets are immutable, typed, compressed on request and revalidated by ETag', async () => {
    const plain = await inject(router, { method: 'GET', url: '/assets/app-AAAA1111.js' });
    assert.equal(plain.status, 200);
    assert.equal(plain.headers['content-type'], 'text/javascript; charset=utf-8');
    assert.equal(plain.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.text, JS);
    const etag = plain.headers['etag'] ?? '';
    assert.match(etag, /^"[\w-]+"$/);

    // (The bytes are checked through a real listener and fetch in dashboard-http.test.ts.)
    const br = await inject(router, { method: 'GET', url: '/assets/app-AAAA1111.js', headers: { 'accept-encoding': 'gzip, deflate, br' } });
    assert.equal(br.headers['content-encoding'], 'br');
    assert.equal(br.headers['vary'], 'accept-encoding');
    assert.ok(br.text.length < JS.length / 4);
    const gz = await inject(router, { method: 'GET', url: '/assets/app-AAAA1111.js', headers: { 'accept-encoding': 'gzip' } });
    assert.equal(gz.headers['content-encoding'], 'gzip');

    const notModified = await inject(router, { method: 'GET', url: '/assets/app-AAAA1111.js', headers: { 'if-none-match': etag } });
    assert.equal(notModified.status, 304);
    assert.equal(notModified.text, '');

    const css = await inject(router, { method: 'GET', url: '/assets/app-BBBB2222.css' });
    assert.equal(css.headers['content-type'], 'text/css; charset=utf-8');
    const svg = await inject(router, { method: 'GET', url: '/assets/favicon-CCCC3333.svg' });
    assert.equal(svg.headers['content-type'], 'image/svg+xml');
  });

  test('unknown or unsafe asset names are a 404 envelope (or 400 from the router), never a file', async () => {
    for (const url of [
      '/assets/nope.js',
      '/assets/',
      '/assets/..%2Findex.html',
      '/assets/.env',
      '/assets/a%00b',
      '/assets/sub/app-AAAA1111.js',
      '/assets/%2e%2e/%2e%2e/etc/passwd',
    ]) {
      const r = await inject(router, { method: 'GET', url });
      assert.ok(r.status === 404 || r.status === 400, `${url}: ${r.status}`);
      const body = r.json() as { error: { code: string } };
      assert.ok(['route.not_found', 'request.invalid'].includes(body.error.code), `${url}: ${body.error.code}`);
      assert.doesNotMatch(r.text, /root:|console\.log/);
    }
  });

  test('the page learns the WS listener address from /api/v1/dashboard/config', async () => {
    const r = await inject(router, { method: 'GET', url: '/api/v1/dashboard/config', headers: { host: 'localhost:8122' } });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json(), { ws_url: 'ws://127.0.0.1:8121/', activity: null });
    assert.equal(dashboardWsUrl({ host: '0.0.0.0', port: 9 }, 'box.example:8122'), 'ws://box.example:9/');
    assert.equal(dashboardWsUrl({ host: '::', port: 9 }, '[::1]:8122'), 'ws://[::1]:9/');
    assert.equal(dashboardWsUrl({ host: '::1', port: 9 }, undefined), 'ws://[::1]:9/');
    assert.equal(dashboardWsUrl({ host: '0.0.0.0', port: 9 }, 'evil/path'), 'ws://127.0.0.1:9/');
    assert.equal(dashboardWsUrl({ host: '127.0.0.1', port: 0 }, undefined), null);
  });

  test('Accept-Encoding negotiation honours q=0', () => {
    assert.equal(pickEncoding('gzip, br'), 'br');
    assert.equal(pickEncoding('gzip;q=1, br;q=0'), 'gzip');
    assert.equal(pickEncoding('identity'), null);
    assert.equal(pickEncoding(undefined), null);
  });

  test('without a build, / says how to build it (503) and a rebuild is picked up without a restart', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'dash-empty-'));
    try {
      const r2 = new Router();
      registerDashboardRoutes(r2, { dir: empty, wsAddress: () => ws });
      const r = await inject(r2, { method: 'GET', url: '/' });
      assert.equal(r.status, 503);
      assert.match((r.json() as { error: { message: string } }).error.message, /npm run build/);
      await mkdir(join(empty, 'assets'));
      await writeFile(join(empty, 'assets', 'app-NEW00000.js'), 'new');
      await writeFile(join(empty, 'index.html'), '<!doctype html>v2');
      const after2 = await inject(r2, { method: 'GET', url: '/' });
      assert.equal(after2.status, 200);
      assert.match(after2.text, /v2/);
      assert.equal((await inject(r2, { method: 'GET', url: '/assets/app-NEW00000.js' })).text, 'new');
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
