/**
 * The scoped storage API over real HTTP (uWS listener, raw request paths through node:http so
 * nothing normalises them): one table of hostile paths — encoded slashes, dot segments in every
 * form, NUL, overlong names, symlinks a guest placed in its inbox — none of which reads, lists or
 * writes outside the area; then listings, the 1 MiB object limit, confirmation, review (a
 * symlink-to-dir swapped in between request and approval), and the inbox quota.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { get, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { OperatorIdentity } from '../../src/auth/operator-identity.js';
import { Router } from '../../src/http/router.js';
import { startHttpListener, type HttpListener } from '../../src/http/uws-server.js';
import { InboxQuota } from '../../src/storage/inbox-quota.js';
import { ReviewStore } from '../../src/storage/review-store.js';
import { registerStorageRoutes } from '../../src/storage/routes.js';
import { registerScopedStorageRoutes } from '../../src/storage/scoped-routes.js';
import { ScopedStorage } from '../../src/storage/scoped-storage.js';
import { Storage } from '../../src/storage/storage.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

interface Res {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text: string;
  code: string | undefined;
}

const QUOTA_BYTES = 64 * 1024;

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

describe('scoped storage over HTTP', () => {
  let base: string;
  let root: string;
  let outside: string;
  let canary: string;
  let listener: HttpListener;
  let reviews: ReviewStore;
  let quota: InboxQuota;
  const gauge = {
    value: -1,
    set(v: number) {
      this.value = v;
    },
  };
  const taskId = `task-${randomUUID()}`;
  const inbox = (): string => join(root, 'inbox', 'agent-1');

  before(async () => {
    base = mkdtempSync(join(tmpdir(), 'sbx-scoped-'));
    root = join(base, 'storage');
    outside = join(base, 'outside');
    canary = `CANARY-${randomBytes(8).toString('hex')}`;
    for (const d of [outside, join(root, 'global', 'docs'), join(inbox(), 'sub'), join(root, 'outbox', taskId), join(inbox(), 'swap')]) {
      mkdirSync(d, { recursive: true });
    }
    writeFileSync(join(outside, 'canary.txt'), canary);
    writeFileSync(join(root, 'global', 'readme.txt'), 'hello\n');
    writeFileSync(join(root, 'global', 'docs', 'guide.md'), '# guide\n');
    writeFileSync(join(inbox(), 'sub', 'x.txt'), 'x');
    // What a guest can plant in its own inbox (it has it mounted read-write).
    symlinkSync('/etc', join(inbox(), 'etc-link'));
    symlinkSync(outside, join(inbox(), 'out-link'));
    symlinkSync(join(outside, 'canary.txt'), join(inbox(), 'file-link'));
    symlinkSync('sub', join(inbox(), 'in-link'));
    symlinkSync('../../../outside/canary.txt', join(inbox(), 'rel-link'));

    const storage = new Storage({ rootDir: root });
    reviews = new ReviewStore(join(base, 'state', 'storage-reviews'));
    quota = new InboxQuota({ inboxesDir: storage.inboxesDir(), quotaBytes: QUOTA_BYTES, gauge });
    const scoped = new ScopedStorage({ storage, reviews, quota });
    const identity = new OperatorIdentity({ trustDomain: 'sbx.test', localRole: 'admin', roles: () => ({ ok: true, roles: new Map() }) });
    const router = new Router();
    registerStorageRoutes(router, { storage });
    registerScopedStorageRoutes(router, { scoped, identity });
    listener = await startHttpListener({ host: '127.0.0.1', port: 0, router, logger: pino({ level: 'silent' }) });
  });

  after(async () => {
    await listener.close();
    await quota.stop();
    reviews.close();
    rmSync(base, { recursive: true, force: true });
  });

  /** One request with the path sent byte for byte as given. */
  const call = (method: string, path: string, opts: { body?: Buffer | string; headers?: Record<string, string> } = {}): Promise<Res> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: listener.port, method, path, headers: opts.headers ?? {} }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => {
          const body = Buffer.concat(parts);
          const text = body.toString('utf8');
          let code: string | undefined;
          try {
            code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
          } catch {
            code = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, code });
        });
      });
      req.on('error', reject);
      req.end(opts.body);
    });

  const A = '/api/v2/storage/inbox/agent-1';
  const outsideNames = (): string[] => readdirSync(outside).sort();

  test('hostile paths never leave the area (one table, over HTTP)', async () => {
    const long256 = 'a'.repeat(256);
    const longPath = Array.from({ length: 21 }, () => 'b'.repeat(200)).join('/'); // 4220 bytes
    const rows: Array<{ name: string; method: string; path: string; status: number; code: string; body?: string }> = [
      // encoded slashes: a name character, never a separator
      {
        name: 'encoded ../ in one segment',
        method: 'GET',
        path: `${A}/objects/..%2F..%2F..%2Foutside%2Fcanary.txt`,
        status: 400,
        code: 'storage.invalid_path',
      },
      { name: 'encoded / makes no separator', method: 'GET', path: `${A}/objects/sub%2Fx.txt`, status: 404, code: 'storage.not_found' },
      { name: 'lone encoded /', method: 'GET', path: `${A}/objects/%2F`, status: 400, code: 'storage.invalid_path' },
      { name: 'encoded /.. tail', method: 'GET', path: `${A}/objects/sub%2F..`, status: 400, code: 'storage.invalid_path' },
      { name: 'list through encoded ../', method: 'GET', path: `${A}/list/..%2F..`, status: 400, code: 'storage.invalid_path' },
      {
        name: 'write through encoded ../',
        method: 'PUT',
        path: `${A}/objects/..%2F..%2F..%2Foutside%2Fevil.txt`,
        status: 400,
        code: 'storage.invalid_path',
        body: 'x',
      },
      // dot segments in every form
      { name: 'raw ..', method: 'GET', path: `${A}/objects/../../../outside/canary.txt`, status: 400, code: 'request.invalid' },
      { name: 'raw .', method: 'GET', path: `${A}/objects/./sub/x.txt`, status: 400, code: 'request.invalid' },
      {
        name: 'percent-encoded ..',
        method: 'GET',
        path: `${A}/objects/%2e%2e/%2E%2E/outside/canary.txt`,
        status: 400,
        code: 'request.invalid',
      },
      { name: 'half-encoded ..', method: 'GET', path: `${A}/objects/.%2e/x`, status: 400, code: 'request.invalid' },
      { name: 'double-encoded ..', method: 'GET', path: `${A}/objects/%252e%252e/x`, status: 400, code: 'storage.invalid_path' },
      {
        name: 'double-encoded ../',
        method: 'PUT',
        path: `${A}/objects/%252e%252e%252f%252e%252e%252fevil`,
        status: 400,
        code: 'storage.invalid_path',
        body: 'x',
      },
      { name: 'double-encoded /', method: 'GET', path: `${A}/objects/sub%252Fx.txt`, status: 400, code: 'storage.invalid_path' },
      { name: 'triple-encoded ..', method: 'GET', path: `${A}/objects/%25252e%25252e`, status: 400, code: 'storage.invalid_path' },
      { name: 'overlong UTF-8 .. (C0 AE)', method: 'GET', path: `${A}/objects/%C0%AE%C0%AE/x`, status: 400, code: 'request.invalid' },
      {
        name: 'overlong UTF-8 . (E0 80 AE)',
        method: 'GET',
        path: `${A}/objects/%E0%80%AE%E0%80%AE/x`,
        status: 400,
        code: 'request.invalid',
      },
      {
        name: 'double-encoded overlong',
        method: 'GET',
        path: `${A}/objects/%25C0%25AE%25C0%25AE`,
        status: 400,
        code: 'storage.invalid_path',
      },
      { name: 'bad escape', method: 'GET', path: `${A}/objects/%zz`, status: 400, code: 'request.invalid' },
      // NUL, control characters, backslash
      { name: 'NUL', method: 'GET', path: `${A}/objects/sub%00/x.txt`, status: 400, code: 'storage.invalid_path' },
      { name: 'NUL in a write', method: 'PUT', path: `${A}/objects/a%00.txt`, status: 400, code: 'storage.invalid_path', body: 'x' },
      { name: 'double-encoded NUL', method: 'GET', path: `${A}/objects/a%2500b`, status: 400, code: 'storage.invalid_path' },
      { name: 'newline', method: 'GET', path: `${A}/objects/a%0Ab`, status: 400, code: 'storage.invalid_path' },
      { name: 'backslash', method: 'GET', path: `${A}/objects/..%5C..%5Coutside`, status: 400, code: 'storage.invalid_path' },
      { name: 'U+2215 (reserved for /)', method: 'GET', path: `${A}/objects/sub%E2%88%95x.txt`, status: 400, code: 'storage.invalid_path' },
      // overlong names
      { name: 'segment of 256 bytes', method: 'GET', path: `${A}/objects/${long256}`, status: 400, code: 'storage.invalid_path' },
      {
        name: 'segment of 256 bytes (write)',
        method: 'PUT',
        path: `${A}/objects/${long256}`,
        status: 400,
        code: 'storage.invalid_path',
        body: 'x',
      },
      {
        name: 'multi-byte segment over 255 bytes',
        method: 'GET',
        path: `${A}/objects/${'%C3%A9'.repeat(128)}`,
        status: 400,
        code: 'storage.invalid_path',
      },
      { name: 'path over 4096 bytes', method: 'GET', path: `${A}/objects/${longPath}`, status: 400, code: 'storage.invalid_path' },
      {
        name: 'more than 64 segments',
        method: 'GET',
        path: `${A}/objects/${Array.from({ length: 65 }, () => 'd').join('/')}`,
        status: 400,
        code: 'storage.invalid_path',
      },
      // symlinks the guest placed in its inbox: never followed, not even inside
      { name: 'symlink to /etc', method: 'GET', path: `${A}/objects/etc-link/passwd`, status: 400, code: 'storage.invalid_path' },
      { name: 'list a symlink to /etc', method: 'GET', path: `${A}/list/etc-link`, status: 400, code: 'storage.invalid_path' },
      { name: 'symlink to a file outside', method: 'GET', path: `${A}/objects/file-link`, status: 400, code: 'storage.invalid_path' },
      { name: 'relative symlink outside', method: 'GET', path: `${A}/objects/rel-link`, status: 400, code: 'storage.invalid_path' },
      {
        name: 'symlink to a dir outside',
        method: 'GET',
        path: `${A}/objects/out-link/canary.txt`,
        status: 400,
        code: 'storage.invalid_path',
      },
      {
        name: 'write through a symlinked dir',
        method: 'PUT',
        path: `${A}/objects/out-link/evil.txt`,
        status: 400,
        code: 'storage.invalid_path',
        body: 'x',
      },
      {
        name: 'write through /etc link',
        method: 'PUT',
        path: `${A}/objects/etc-link/evil.conf`,
        status: 400,
        code: 'storage.invalid_path',
        body: 'x',
      },
      {
        name: 'overwrite a symlink',
        method: 'PUT',
        path: `${A}/objects/file-link?confirm=overwrite`,
        status: 400,
        code: 'storage.invalid_path',
        body: 'x',
      },
      { name: 'symlink inside the area', method: 'GET', path: `${A}/objects/in-link/x.txt`, status: 400, code: 'storage.invalid_path' },
      // hostile owners
      { name: 'owner ../', method: 'GET', path: '/api/v2/storage/inbox/..%2F..%2Foutside/list', status: 400, code: 'storage.invalid_path' },
      { name: 'owner ..', method: 'GET', path: '/api/v2/storage/inbox/%2e%2e/list', status: 400, code: 'request.invalid' },
      {
        name: 'outbox owner neither a task nor a VM',
        method: 'GET',
        path: '/api/v2/storage/outbox/Task-1/list',
        status: 400,
        code: 'storage.invalid_path',
      },
      // global is read-only
      {
        name: 'write to global',
        method: 'PUT',
        path: '/api/v2/storage/global/objects/new.txt',
        status: 403,
        code: 'storage.read_only',
        body: 'x',
      },
      {
        name: 'delete in global',
        method: 'DELETE',
        path: '/api/v2/storage/global/objects/readme.txt?confirm=delete',
        status: 403,
        code: 'storage.read_only',
      },
      // the v1 download follows no symlink out of the area either
      {
        name: 'v1 download through /etc link',
        method: 'GET',
        path: '/api/v1/storage/inbox/agent-1/_download?path=etc-link/passwd',
        status: 400,
        code: 'storage.invalid_path',
      },
    ];
    const before = outsideNames();
    const pendingBefore = reviews.list('pending', 500).length;
    for (const row of rows) {
      const res = await call(row.method, row.path, row.body === undefined ? {} : { body: row.body });
      assert.equal(res.status, row.status, `${row.name}: status (${res.text.slice(0, 200)})`);
      assert.equal(res.code, row.code, `${row.name}: code`);
      assert.ok(!res.text.includes(canary), `${row.name}: the canary outside the area leaked`);
      assert.ok(!/root:.*:0:0:/u.test(res.text), `${row.name}: /etc/passwd leaked`);
    }
    assert.deepEqual(outsideNames(), before, 'nothing was written outside the area');
    assert.equal(readFileSync(join(outside, 'canary.txt'), 'utf8'), canary);
    assert.equal(reviews.list('pending', 500).length, pendingBefore, 'no hostile write became a pending review');
    assert.ok(!existsSync('/etc/evil.conf'));
  });

  test('a name with an encoded / is one entry: stored, listed and read back as a/b', async () => {
    const put = await call('PUT', `${A}/objects/notes/a%2Fb.txt`, { body: 'slash name' });
    assert.equal(put.status, 202, put.text);
    const id = (JSON.parse(put.text) as { review: { id: string } }).review.id;
    const ok = await call('POST', `/api/v2/storage/reviews/${id}/approve`);
    assert.equal(ok.status, 200, ok.text);
    assert.ok(!existsSync(join(inbox(), 'notes', 'a')), 'no directory a was made');
    const list = JSON.parse((await call('GET', `${A}/list/notes`)).text) as { entries: Array<{ name: string }> };
    assert.deepEqual(
      list.entries.map((e) => e.name),
      ['a/b.txt'],
    );
    const got = await call('GET', `${A}/objects/notes/a%2Fb.txt`);
    assert.equal(got.status, 200);
    assert.equal(got.text, 'slash name');
  });

  test('listings: metadata only, at most 500 a page, a cursor for the rest', async () => {
    const dir = join(root, 'outbox', taskId, 'many');
    mkdirSync(dir);
    for (let i = 0; i < 1203; i++) writeFileSync(join(dir, `f${String(i).padStart(4, '0')}.txt`), `secret-content-${i}`);
    const O = `/api/v2/storage/outbox/${taskId}`;
    const names: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await call('GET', `${O}/list/many${cursor === null ? '' : `?cursor=${cursor}`}`);
      assert.equal(res.status, 200, res.text);
      assert.ok(!res.text.includes('secret-content'), 'a listing never carries contents');
      const page = JSON.parse(res.text) as {
        entries: Array<{ name: string; kind: string; size_bytes: number; modified: string }>;
        next_cursor: string | null;
        has_more: boolean;
      };
      assert.ok(page.entries.length <= 500);
      for (const e of page.entries) assert.deepEqual(Object.keys(e).sort(), ['kind', 'modified', 'name', 'size_bytes']);
      names.push(...page.entries.map((e) => e.name));
      cursor = page.next_cursor;
      assert.equal(page.has_more, cursor !== null);
      pages++;
    } while (cursor !== null);
    assert.equal(pages, 3);
    assert.equal(names.length, 1203);
    assert.equal(new Set(names).size, 1203);
    assert.equal((await call('GET', `${O}/list/many?limit=501`)).code, 'request.invalid');
    assert.equal((await call('GET', `${O}/list/many?cursor=garbage`)).code, 'request.invalid');
    const rootList = JSON.parse((await call('GET', '/api/v2/storage/global/list')).text) as {
      entries: Array<{ name: string; kind: string }>;
    };
    assert.deepEqual(
      rootList.entries.map((e) => `${e.kind}:${e.name}`),
      ['dir:docs', 'file:readme.txt'],
    );
    const guest = JSON.parse((await call('GET', `${A}/list`)).text) as { entries: Array<{ name: string; kind: string }> };
    assert.equal(guest.entries.find((e) => e.name === 'etc-link')?.kind, 'symlink', 'symlinks are listed as such, never resolved');
  });

  test('objects are at most 1 MiB through the scoped API; bigger files go through _download', async () => {
    writeFileSync(join(root, 'global', 'big.bin'), Buffer.alloc(1024 * 1024 + 1, 1));
    writeFileSync(join(root, 'global', 'exact.bin'), Buffer.alloc(1024 * 1024, 2));
    const big = await call('GET', '/api/v2/storage/global/objects/big.bin');
    assert.equal(big.status, 413);
    assert.equal(big.code, 'storage.object_too_large');
    const exact = await call('GET', '/api/v2/storage/global/objects/exact.bin');
    assert.equal(exact.status, 200);
    assert.equal(exact.body.byteLength, 1024 * 1024);
    const dl = await call('GET', '/api/v1/storage/global/_download?path=big.bin');
    assert.equal(dl.status, 200);
    assert.equal(dl.body.byteLength, 1024 * 1024 + 1);
    const put = await call('PUT', `${A}/objects/too-big.bin`, { body: Buffer.alloc(1024 * 1024 + 1) });
    assert.equal(put.status, 413);
    assert.equal(put.code, 'request.body_too_large');
    assert.ok(!existsSync(join(inbox(), 'too-big.bin')));
  });

  test('overwrite and delete need confirmation; writes land only after review', async () => {
    const O = `/api/v2/storage/outbox/${taskId}`;
    const first = await call('PUT', `${O}/objects/report.txt`, { body: 'v1' });
    assert.equal(first.status, 202);
    const review = (JSON.parse(first.text) as { review: { id: string; state: string; expected_etag: string | null } }).review;
    assert.equal(review.state, 'pending');
    assert.equal(review.expected_etag, null);
    assert.equal(first.headers['location'], `/api/v2/storage/reviews/${review.id}`);
    assert.ok(!existsSync(join(root, 'outbox', taskId, 'report.txt')), 'nothing lands before review');
    assert.equal((await call('POST', `/api/v2/storage/reviews/${review.id}/approve`)).status, 200);
    assert.equal(readFileSync(join(root, 'outbox', taskId, 'report.txt'), 'utf8'), 'v1');
    assert.equal((await call('POST', `/api/v2/storage/reviews/${review.id}/approve`)).code, 'storage.review_decided');

    const noConfirm = await call('PUT', `${O}/objects/report.txt`, { body: 'v2' });
    assert.equal(noConfirm.status, 428);
    assert.equal(noConfirm.code, 'storage.confirmation_required');
    const stale = await call('PUT', `${O}/objects/report.txt`, { body: 'v2', headers: { 'if-match': '"nope"' } });
    assert.equal(stale.status, 412);
    const etag = String((await call('GET', `${O}/objects/report.txt`)).headers['etag']);
    const over = await call('PUT', `${O}/objects/report.txt`, { body: 'v2', headers: { 'if-match': etag } });
    assert.equal(over.status, 202);
    const overId = (JSON.parse(over.text) as { review: { id: string } }).review.id;
    const rejected = await call('POST', `/api/v2/storage/reviews/${overId}/reject`);
    assert.equal((JSON.parse(rejected.text) as { review: { state: string } }).review.state, 'rejected');
    assert.equal(readFileSync(join(root, 'outbox', taskId, 'report.txt'), 'utf8'), 'v1', 'a rejected write never lands');

    // Approving applies only over the version the requester saw.
    const viaQuery = await call('PUT', `${O}/objects/report.txt?confirm=overwrite`, { body: 'v3' });
    const v3 = (JSON.parse(viaQuery.text) as { review: { id: string } }).review.id;
    writeFileSync(join(root, 'outbox', taskId, 'report.txt'), 'changed by the guest');
    const late = await call('POST', `/api/v2/storage/reviews/${v3}/approve`);
    assert.equal(late.status, 412);
    assert.equal(
      (JSON.parse((await call('GET', `/api/v2/storage/reviews/${v3}`)).text) as { review: { state: string } }).review.state,
      'failed',
    );
    assert.equal(readFileSync(join(root, 'outbox', taskId, 'report.txt'), 'utf8'), 'changed by the guest');

    assert.equal((await call('DELETE', `${O}/objects/report.txt`)).code, 'storage.confirmation_required');
    const del = await call('DELETE', `${O}/objects/report.txt?confirm=delete`);
    assert.equal(del.status, 202);
    assert.ok(existsSync(join(root, 'outbox', taskId, 'report.txt')));
    const delId = (JSON.parse(del.text) as { review: { id: string } }).review.id;
    assert.equal((await call('POST', `/api/v2/storage/reviews/${delId}/approve`)).status, 200);
    assert.ok(!existsSync(join(root, 'outbox', taskId, 'report.txt')));
    const pending = JSON.parse((await call('GET', '/api/v2/storage/reviews?state=pending')).text) as { reviews: unknown[] };
    assert.ok(Array.isArray(pending.reviews));
  });

  test('a directory swapped for a symlink between request and approval: the write fails, nothing lands outside', async () => {
    const put = await call('PUT', `${A}/objects/swap/new.txt`, { body: 'payload' });
    assert.equal(put.status, 202, put.text);
    const id = (JSON.parse(put.text) as { review: { id: string } }).review.id;
    renameSync(join(inbox(), 'swap'), join(inbox(), 'swap-old'));
    symlinkSync(outside, join(inbox(), 'swap'));
    const res = await call('POST', `/api/v2/storage/reviews/${id}/approve`);
    assert.equal(res.status, 400);
    assert.equal(res.code, 'storage.invalid_path');
    assert.ok(!existsSync(join(outside, 'new.txt')), 'the write did not follow the swapped-in symlink');
    assert.deepEqual(readdirSync(join(inbox(), 'swap-old')), []);
  });

  test('the inbox quota: a write past it is refused and leaves nothing, at request and at apply', async () => {
    const Q = '/api/v2/storage/inbox/agent-q';
    const approve = async (res: Res): Promise<Res> => {
      assert.equal(res.status, 202, res.text);
      return call('POST', `/api/v2/storage/reviews/${(JSON.parse(res.text) as { review: { id: string } }).review.id}/approve`);
    };
    assert.equal((await approve(await call('PUT', `${Q}/objects/base.bin`, { body: Buffer.alloc(40 * 1024) }))).status, 200);
    assert.ok(gauge.value >= 40 * 1024, `svc_agentshare_inbox_bytes reports the inbox (${gauge.value})`);
    const over = await call('PUT', `${Q}/objects/over.bin`, { body: Buffer.alloc(30 * 1024) });
    assert.equal(over.status, 507);
    assert.equal(over.code, 'storage.quota_exceeded');
    // Two writes that fit one at a time but not together: the second fails at apply.
    const a = await call('PUT', `${Q}/objects/a.bin`, { body: Buffer.alloc(20 * 1024) });
    const b = await call('PUT', `${Q}/objects/b.bin`, { body: Buffer.alloc(20 * 1024) });
    assert.equal((await approve(a)).status, 200);
    const late = await approve(b);
    assert.equal(late.status, 507);
    assert.equal(late.code, 'storage.quota_exceeded');
    assert.deepEqual(readdirSync(join(root, 'inbox', 'agent-q')).sort(), ['a.bin', 'base.bin'], 'no partial or temp file is left');
    assert.equal(await quota.usage('agent-q'), 60 * 1024);
  });

  test('streamed downloads over uWS: HEAD sends the length only; a client that hangs up releases the file', async () => {
    const file = join(root, 'global', 'stream.bin');
    writeFileSync(file, Buffer.alloc(32 * 1024 * 1024, 3));
    const head = await call('HEAD', '/api/v1/storage/global/_download?path=stream.bin');
    assert.equal(head.status, 200);
    assert.equal(head.headers['content-length'], String(32 * 1024 * 1024));
    assert.equal(head.body.byteLength, 0);
    await new Promise<void>((resolve) => {
      const req = get({ host: '127.0.0.1', port: listener.port, path: '/api/v1/storage/global/_download?path=stream.bin' }, (res) => {
        res.once('data', () => {
          assert.ok(openFds(file) >= 1, 'the server holds the file while it streams');
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => resolve());
    });
    await waitFor('the download to release its file', () => (openFds(file) === 0 ? true : undefined), {
      deadlineMs: DEADLINE_MS.local,
      lastState: () => `${openFds(file)} descriptors open`,
    });
    const again = await call('GET', '/api/v1/storage/global/_download?path=stream.bin');
    assert.equal(again.body.byteLength, 32 * 1024 * 1024, 'the server serves the next download whole');
  });

  test("the reference implementation's listing route answers its shape (root is the area, never a host path)", async () => {
    const res = await call('GET', '/api/v1/storage/inbox/agent-1?path=sub');
    assert.equal(res.status, 200, res.text);
    const body = JSON.parse(res.text) as { root: string; path: string; entries: Array<Record<string, unknown>> };
    assert.equal(body.root, 'inbox/agent-1');
    assert.equal(body.path, 'sub');
    assert.deepEqual(
      body.entries.map((e) => [e['name'], e['kind'], e['size_bytes']]),
      [['x.txt', 'file', 1]],
    );
    assert.match(String(body.entries[0]?.['mode']), /^0[0-7]{3}$/u);
    assert.ok(!res.text.includes(base), 'no host path in the answer');
    const top = JSON.parse((await call('GET', '/api/v1/storage/inbox/agent-1')).text) as { entries: Array<{ name: string; kind: string }> };
    assert.equal(top.entries.find((e) => e.name === 'etc-link')?.kind, 'other', 'a symlink is listed, not followed');
    const one = JSON.parse((await call('GET', '/api/v1/storage/global?path=readme.txt')).text) as { entries: Array<{ name: string }> };
    assert.deepEqual(
      one.entries.map((e) => e.name),
      ['readme.txt'],
    );
    const link = JSON.parse((await call('GET', '/api/v1/storage/inbox/agent-1?path=etc-link')).text) as {
      entries: Array<{ name: string; kind: string }>;
    };
    assert.deepEqual(link.entries, [{ ...link.entries[0], name: 'etc-link', kind: 'other' }], 'the link itself, never what it points to');
    for (const path of ['etc-link/passwd', '../outside', 'out-link/x', 'a\u0000b']) {
      const bad = await call('GET', `/api/v1/storage/inbox/agent-1?path=${encodeURIComponent(path)}`);
      assert.equal(bad.status, 400, path);
      assert.ok(!bad.text.includes(canary));
    }
    assert.equal(
      (await call('POST', '/api/v1/storage/inbox/agent-1?path=x.txt', { body: 'unreviewed' })).status,
      405,
      'no unreviewed upload',
    );
  });
});
