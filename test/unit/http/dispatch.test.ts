import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { inject, MemorySseSink } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { sseComment, sseFrame } from '../../../src/http/sse.js';

function router(): Router {
  const r = new Router();
  r.add({ method: 'POST', path: '/echo/:id', handler: (req) => ({ status: 201, json: { id: req.params.id, body: req.body ?? null } }) });
  r.add({ method: 'POST', path: '/small', maxBodyBytes: 8, handler: () => ({ status: 200, json: {} }) });
  r.add({ method: 'PUT', path: '/raw', body: 'raw', handler: (req) => ({ status: 200, json: { bytes: req.rawBody?.byteLength ?? 0 } }) });
  r.add({
    method: 'GET',
    path: '/vm/:name',
    handler: (req) => {
      throw new SvcError('VM_NOT_FOUND', `VM ${req.params.name} not found`);
    },
  });
  r.add({
    method: 'GET',
    path: '/boom',
    handler: () => {
      throw new Error('secret internals');
    },
  });
  r.add({ method: 'GET', path: '/reject', handler: () => Promise.reject(new TypeError('async boom')) });
  r.add({ method: 'GET', path: '/bad-header', handler: () => ({ status: 200, headers: { 'x-a': 'a\r\nset-cookie: x' }, json: {} }) });
  r.add({ method: 'GET', path: '/text', handler: () => ({ status: 200, body: 'hello', contentType: 'text/plain' }) });
  r.add({
    method: 'GET',
    path: '/typed',
    responseSchema: { type: 'object', properties: { n: { type: 'integer' } } },
    handler: () => ({ status: 200, json: { n: 3, extra: true } }),
  });
  r.add({
    method: 'GET',
    path: '/events',
    handler: () => ({
      sse: (sink) => {
        sink.write(sseFrame({ event: 'output', id: 1, data: 'a' }));
        sink.close();
      },
    }),
  });
  return r;
}

void describe('inject (the socket-free pipeline)', () => {
  void test('a JSON handler gets params and the parsed body', async () => {
    const res = await inject(router(), { method: 'POST', url: '/echo/a%20b', body: { x: 1 } });
    assert.equal(res.status, 201);
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    assert.deepEqual(res.json(), { id: 'a b', body: { x: 1 } });
  });

  void test('an SvcError renders the v1 envelope with its table status', async () => {
    const res = await inject(router(), { method: 'GET', url: '/vm/agent-x' });
    assert.equal(res.status, 404);
    assert.deepEqual(res.json(), { error: { code: 'VM_NOT_FOUND', message: 'VM agent-x not found' } });
  });

  void test('any other throw is a 500 server.internal without internals, reported to the hook', async () => {
    for (const url of ['/boom', '/reject', '/bad-header']) {
      const seen: string[] = [];
      const res = await inject(router(), { method: 'GET', url }, { onInternalError: (_err, route) => seen.push(route) });
      assert.equal(res.status, 500, url);
      assert.deepEqual(res.json(), { error: { code: 'server.internal', message: 'internal error' } });
      assert.deepEqual(seen, [url]);
    }
  });

  void test('body errors: wrong content type, malformed JSON, too large', async () => {
    const r = router();
    const wrongType = await inject(r, { method: 'POST', url: '/echo/1', body: '{}', headers: { 'content-type': 'text/plain' } });
    assert.equal(wrongType.status, 400);
    assert.equal((wrongType.json() as { error: { code: string } }).error.code, 'request.unsupported_media_type');
    const malformed = await inject(r, { method: 'POST', url: '/echo/1', body: '{', headers: { 'content-type': 'application/json' } });
    assert.equal((malformed.json() as { error: { code: string } }).error.code, 'request.malformed_json');
    const large = await inject(r, { method: 'POST', url: '/small', body: { much: 'too long' } });
    assert.equal(large.status, 413);
    assert.equal((large.json() as { error: { code: string } }).error.code, 'request.body_too_large');
  });

  void test('raw routes get the bytes untouched', async () => {
    const res = await inject(router(), { method: 'PUT', url: '/raw', body: new Uint8Array([1, 2, 3]) });
    assert.deepEqual(res.json(), { bytes: 3 });
  });

  void test('405 carries an Allow header; 404 for unknown routes', async () => {
    const r = router();
    const res = await inject(r, { method: 'DELETE', url: '/echo/1' });
    assert.equal(res.status, 405);
    assert.equal(res.headers.allow, 'POST');
    assert.equal((await inject(r, { method: 'GET', url: '/nope?x=1' })).status, 404);
  });

  void test('raw results keep their content type; schemas shape JSON results', async () => {
    const r = router();
    const text = await inject(r, { method: 'GET', url: '/text' });
    assert.equal(text.text, 'hello');
    assert.equal(text.headers['content-type'], 'text/plain');
    assert.equal((await inject(r, { method: 'GET', url: '/typed' })).text, '{"n":3}');
  });

  void test('SSE results come back unstarted and can be driven with a MemorySseSink', async () => {
    const res = await inject(router(), { method: 'GET', url: '/events' });
    assert.ok(res.sse);
    const sink = new MemorySseSink();
    let closed = false;
    sink.onClose(() => (closed = true));
    await res.sse.start(sink, res.sse.view);
    assert.deepEqual(sink.frames, ['event: output\nid: 1\ndata: a\n\n']);
    assert.ok(closed);
  });
});

void describe('SSE frames', () => {
  void test('multi-line data becomes several data lines; fields cannot inject lines', () => {
    assert.equal(sseFrame({ data: 'a\nb\r\nc' }), 'data: a\ndata: b\ndata: c\n\n');
    assert.equal(sseFrame({ event: 'x\ny', id: 'a\rb', data: '', retryMs: 1500 }), 'event: x y\nid: a b\nretry: 1500\ndata: \n\n');
    assert.equal(sseComment('ping'), ': ping\n\n');
  });
});

void test('errors that carry retryAfterSeconds get a Retry-After header', async () => {
  const router = new Router();
  router.add({
    method: 'GET',
    path: '/busy',
    handler: () => {
      throw new SvcError('HYPERVISOR_UNAVAILABLE', 'circuit open', { retryAfterSeconds: 29.2 });
    },
  });
  const r = await inject(router, { method: 'GET', url: '/busy' });
  assert.equal(r.status, 503);
  assert.equal(r.headers['retry-after'], '30');
  assert.deepEqual(r.json(), { error: { code: 'HYPERVISOR_UNAVAILABLE', message: 'circuit open' } });
});
