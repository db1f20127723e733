/**
 * GET /api/v1/storage/{global,inbox/{agent_id},outbox/{task_id}}/_download through the router,
 * socket-free. A table of hostile paths and ids: every one is a 400 (or 404 for names that are
 * merely odd), and the canary file outside the root never shows up in any response.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { registerStorageRoutes } from '../../../src/storage/routes.js';
import { inject, type InjectResponse } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { Storage } from '../../../src/storage/storage.js';
import { makeStorageFixture, type StorageFixture } from './storage-fixture.js';

describe('storage download routes', () => {
  let fx: StorageFixture;
  let router: Router;
  const seen: InjectResponse[] = [];
  let passwd = '';

  before(() => {
    fx = makeStorageFixture();
    router = new Router();
    registerStorageRoutes(router, { storage: new Storage({ rootDir: fx.root, maxDownloadBytes: 1024 }) });
    try {
      passwd = readFileSync('/etc/passwd', 'utf8').split('\n')[0] ?? '';
    } catch {
      passwd = '';
    }
  });
  after(() => fx.cleanup());

  const get = async (url: string): Promise<InjectResponse> => {
    const res = await inject(router, { method: 'GET', url });
    seen.push(res);
    return res;
  };
  const code = (res: InjectResponse): string => (res.json() as { error: { code: string } }).error.code;

  test('global: raw bytes with Content-Type, Content-Disposition and Content-Length', async () => {
    const res = await get('/api/v1/storage/global/_download?path=readme.txt');
    assert.equal(res.status, 200);
    assert.equal(res.text, 'hello from global\n');
    assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(res.headers['content-disposition'], `attachment; filename="readme.txt"; filename*=UTF-8''readme.txt`);
    assert.equal(res.headers['content-length'], String(Buffer.byteLength('hello from global\n')));
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
  });

  test('nested paths, encoded names, inbox and outbox areas', async () => {
    const md = await get('/api/v1/storage/global/_download?path=docs%2Fguide.md');
    assert.equal(md.status, 200);
    assert.equal(md.headers['content-type'], 'text/markdown; charset=utf-8');
    const inbox = await get('/api/v1/storage/inbox/agent-1/_download?path=sub/data.json');
    assert.equal(inbox.status, 200);
    assert.deepEqual(inbox.json(), { ok: true });
    assert.equal(inbox.headers['content-type'], 'application/json');
    const out = await get(`/api/v1/storage/outbox/${fx.taskId}/_download?path=change.diff`);
    assert.equal(out.status, 200);
    assert.equal(out.headers['content-type'], 'text/x-diff; charset=utf-8');
    const quoted = await get(`/api/v1/storage/global/_download?path=${encodeURIComponent('a"b;c.txt')}`);
    assert.equal(quoted.status, 200);
    assert.match(quoted.headers['content-disposition'] ?? '', /filename="a_b_c\.txt"/u);
    const png = await get('/api/v1/storage/global/_download?path=image.png');
    assert.equal(png.headers['content-type'], 'image/png');
    assert.equal(png.headers['content-length'], String(fx.png.byteLength));
  });

  test('missing files and areas are 404 storage.not_found', async () => {
    for (const url of [
      '/api/v1/storage/global/_download?path=nope.txt',
      '/api/v1/storage/inbox/agent-2/_download?path=in.txt',
      `/api/v1/storage/outbox/task-00000000-0000-4000-8000-000000000000/_download?path=report.json`,
      // Double encoding is not traversal: it names a file literally called "%2e%2e%2fetc".
      '/api/v1/storage/global/_download?path=%252e%252e%252fetc',
    ]) {
      const res = await get(url);
      assert.equal(res.status, 404, url);
      assert.equal(code(res), 'storage.not_found', url);
    }
    const literal = await get('/api/v1/storage/global/_download?path=%252e%252e%252fliteral.txt');
    assert.equal(literal.status, 200, 'a literal file with that name is served');
  });

  const HOSTILE_PATHS: ReadonlyArray<[string, string]> = [
    ['raw ../', '../outside/canary.txt'],
    ['raw ../../', '../../outside/canary.txt'],
    ['encoded %2e%2e/', '%2e%2e/outside/canary.txt'],
    ['fully encoded', '%2e%2e%2f%2e%2e%2foutside%2fcanary.txt'],
    ['upper-case encoding', '%2E%2E%2F%2E%2E%2Foutside%2Fcanary.txt'],
    ['.. in the middle', 'docs/../../../outside/canary.txt'],
    ['trailing ..', 'docs/..'],
    ['absolute', '/etc/passwd'],
    ['encoded absolute', '%2fetc%2fpasswd'],
    ['backslash', 'a\\b'],
    ['encoded backslash traversal', '..%5c..%5coutside%5ccanary.txt'],
    ['NUL', 'readme.txt%00.png'],
    ['NUL alone', '%00'],
    ['newline', 'readme.txt%0a'],
    ['empty', ''],
    ['dot', '.'],
    ['dot segment', './readme.txt'],
    ['empty segment', 'docs//guide.md'],
    ['trailing slash', 'docs/'],
    ['directory', 'docs'],
    ['symlinked directory (inside) named as a file', 'dirlink-in'],
    ['symlink out (absolute target)', 'link-out'],
    ['symlink out (relative target)', 'link-out-rel'],
    ['symlink to /etc/passwd', 'link-abs'],
    ['symlinked parent directory', 'dirlink-out/canary.txt'],
    ['dangling symlink out', 'dangling-out'],
    ['symlink to a sibling sharing the prefix', 'sibling'],
    ['symlink to the root’s parent', 'up-one'],
    ['chain of symlinks ending outside', 'chain-out'],
    ['symlink loop', 'loop'],
    ['FIFO', 'fifo'],
    ['very long path', 'a/'.repeat(3000) + 'b'],
    ['very long segment', 'x'.repeat(300)],
    ['too many segments', Array.from({ length: 70 }, () => 'a').join('/')],
  ];

  for (const [name, p] of HOSTILE_PATHS) {
    test(`hostile path: ${name} → 400 storage.invalid_path`, async () => {
      const res = await get(`/api/v1/storage/global/_download?path=${p}`);
      assert.equal(res.status, 400, `${res.status} ${res.text.slice(0, 200)}`);
      assert.equal(code(res), 'storage.invalid_path');
    });
  }

  test('hostile paths are refused in the inbox and outbox areas too', async () => {
    for (const [, p] of HOSTILE_PATHS.slice(0, 14)) {
      for (const area of ['inbox/agent-1', `outbox/${fx.taskId}`]) {
        const res = await get(`/api/v1/storage/${area}/_download?path=${p}`);
        assert.equal(res.status, 400, `${area} ${p}`);
      }
    }
  });

  test('a missing or repeated path parameter is 400', async () => {
    const none = await get('/api/v1/storage/global/_download');
    assert.equal(none.status, 400);
    assert.equal(code(none), 'storage.invalid_path');
    const twice = await get('/api/v1/storage/global/_download?path=readme.txt&path=../outside/canary.txt');
    assert.equal(twice.status, 400);
  });

  test('bad agent and task ids are 400', async () => {
    const cases: ReadonlyArray<[string, string]> = [
      ['/api/v1/storage/inbox/../_download?path=x', 'request.invalid'],
      ['/api/v1/storage/inbox/%2e%2e/_download?path=outside/canary.txt', 'request.invalid'],
      ['/api/v1/storage/inbox/a%2fb/_download?path=x', 'storage.invalid_path'],
      ['/api/v1/storage/inbox/a%00b/_download?path=x', 'storage.invalid_path'],
      [`/api/v1/storage/inbox/${'a'.repeat(129)}/_download?path=x`, 'storage.invalid_path'],
      ['/api/v1/storage/inbox/evil/_download?path=canary.txt', 'storage.invalid_path'],
      ['/api/v1/storage/outbox/task-123/_download?path=report.json', 'storage.invalid_path'],
      ['/api/v1/storage/outbox/..%2foutside/_download?path=canary.txt', 'storage.invalid_path'],
      [`/api/v1/storage/outbox/${fx.taskId.toUpperCase()}/_download?path=report.json`, 'storage.invalid_path'],
    ];
    for (const [url, expected] of cases) {
      const res = await get(url);
      assert.equal(res.status, 400, url);
      assert.equal(code(res), expected, url);
    }
  });

  test('files over the download limit (SVC_STORAGE_MAX_DOWNLOAD_BYTES) are 413', async () => {
    const res = await get('/api/v1/storage/global/_download?path=big.bin');
    assert.equal(res.status, 413);
    assert.equal(code(res), 'storage.download_too_large');
    assert.match(res.text, /4096 bytes; downloads are limited to 1024 bytes/u);
  });

  test('the v1 download route takes no writes (they are the scoped API)', async () => {
    for (const method of ['PUT', 'POST', 'DELETE', 'PATCH']) {
      const res = await inject(router, { method, url: '/api/v1/storage/global/_download?path=readme.txt', body: 'x' });
      assert.equal(res.status, 405, method);
    }
  });

  test('nothing outside the roots was ever read (canary)', () => {
    assert.ok(seen.length > 60, `checked ${seen.length} responses`);
    for (const res of seen) {
      assert.ok(!res.text.includes(fx.canary), `canary leaked: ${res.text.slice(0, 100)}`);
      if (passwd !== '') assert.ok(!res.text.includes(passwd), '/etc/passwd leaked');
    }
  });
});
