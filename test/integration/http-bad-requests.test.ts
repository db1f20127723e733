/**
 * Bad requests against the real uWS listener: each gets the v1 envelope and the right status, or
 * (when the client goes away) is noticed without running the handler; afterwards the server
 * still answers /healthz.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Writable } from 'node:stream';
import { registerHealthRoutes } from '../../src/server/health.js';
import { parseEnumParam, parseIntParam } from '../../src/http/body.js';
import { Router } from '../../src/http/router.js';
import type { RequestInfo } from '../../src/http/types.js';
import { startHttpListener, uwsRuntimeInfo, type HttpListener } from '../../src/http/uws-server.js';
import { countErrorLines, createLogger } from '../../src/observability/log.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { parseResponse, rawGet, type RawResponse } from './http-raw-client.js';

/**
 * Send `head` then stream `chunks` (stopping early once a response arrived), and resolve with the
 * response, or with null when the server closed the connection without one.
 */
function exchange(port: number, head: string, chunks: Array<string | Buffer> = []): Promise<RawResponse | null> {
  return new Promise((resolve) => {
    const sock: Socket = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let settled = false;
    const done = (r: RawResponse | null): void => {
      if (settled) return;
      settled = true;
      sock.destroy();
      resolve(r);
    };
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const r = parseResponse(buf);
      if (r) done(r[0]);
    });
    sock.on('error', () => done(parseResponse(buf)?.[0] ?? null));
    sock.on('close', () => done(parseResponse(buf)?.[0] ?? null));
    sock.on('connect', () => {
      void (async () => {
        sock.write(head);
        for (const c of chunks) {
          if (settled || sock.destroyed) return;
          if (!sock.write(c)) await new Promise((r) => sock.once('drain', r).once('close', r));
        }
      })();
    });
  });
}

/** Open a socket, send `parts` with a pause between them, then drop the connection. */
async function sendAndDrop(port: number, parts: string[], pauseMs: number): Promise<void> {
  const sock = connect(port, '127.0.0.1');
  sock.on('error', () => undefined);
  await new Promise((r) => sock.once('connect', r));
  for (const p of parts) {
    sock.write(p);
    // The behaviour under test: a client that sends its request in slow pieces.
    await sleep(pauseMs);
  }
  sock.destroy();
}

const post = (path: string, body: string, headers: Record<string, string>): string =>
  `POST ${path} HTTP/1.1\r\nhost: t\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const get = rawGet;
const JSON_CT = { 'content-type': 'application/json' };

void describe('bad requests get the v1 envelope; the server survives', () => {
  let listener: HttpListener;
  let port: number;
  const infos: RequestInfo[] = [];
  const handled: string[] = [];
  const logLines: string[] = [];
  const metrics = createMetrics({ defaultMetrics: false });

  before(async () => {
    const router = new Router();
    registerHealthRoutes(router, {
      readiness: () => ({ ready: true, reason: 'ok' }),
      startedAtMs: Date.now(),
      agentCount: () => 0,
      activeTasks: () => 0,
      uws: uwsRuntimeInfo,
      actors: () => ({ mode: 'inline', shards: 1, restarts: 0 }),
    });
    router.add({
      method: 'POST',
      path: '/echo',
      handler: (req) => (handled.push('echo'), { status: 200, json: { body: req.body ?? null } }),
    });
    router.add({ method: 'POST', path: '/items/:id', handler: (req) => ({ status: 200, json: { id: req.params.id } }) });
    router.add({ method: 'POST', path: '/small', maxBodyBytes: 16, handler: () => ({ status: 200, json: {} }) });
    router.add({ method: 'POST', path: '/slow', bodyTimeoutMs: 300, handler: () => (handled.push('slow'), { status: 200, json: {} }) });
    // A body budget no trickle reaches, so the only way such a request ends is the client's abort.
    router.add({
      method: 'POST',
      path: '/trickle',
      bodyTimeoutMs: 600_000,
      handler: () => (handled.push('trickle'), { status: 200, json: {} }),
    });
    router.add({
      method: 'GET',
      path: '/q',
      handler: (req) => ({
        status: 200,
        json: {
          limit: parseIntParam(req.query, 'limit', { min: 1, max: 1000, default: 50 }),
          state: parseEnumParam(req.query, 'state', ['running', 'failed'] as const, { default: 'running' }),
        },
      }),
    });
    router.add({
      method: 'GET',
      path: '/boom',
      handler: () => {
        throw new Error('database password is hunter2');
      },
    });
    const destination = new Writable({
      write(chunk: Buffer, _enc, cb) {
        logLines.push(chunk.toString());
        cb();
      },
    });
    const root = createLogger({ format: 'json', level: 'error', file: null, rotation: 'none', retentionDays: 7 }, { destination }).logger;
    countErrorLines(root, metrics.errorsLoggedTotal);
    const logger = root.child({ component: 'http' });
    listener = await startHttpListener({ host: '127.0.0.1', port: 0, router, logger, metrics, onRequest: (i) => infos.push(i) });
    port = listener.port;
  });

  after(() => listener.close());

  const MiB = 1024 * 1024;
  const table: Array<{
    name: string;
    head: string;
    chunks?: Array<string | Buffer>;
    status: number;
    code: string;
    check?: (r: RawResponse) => void;
  }> = [
    { name: 'malformed JSON', head: post('/echo', '{"a":', JSON_CT), status: 400, code: 'request.malformed_json' },
    {
      name: 'body not UTF-8',
      head: 'POST /echo HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 3\r\n\r\n',
      chunks: [Buffer.from([0x22, 0xff, 0x22])],
      status: 400,
      code: 'request.malformed_json',
    },
    {
      name: 'wrong content type',
      head: post('/echo', '{}', { 'content-type': 'text/plain' }),
      status: 400,
      code: 'request.unsupported_media_type',
    },
    { name: 'no content type', head: post('/echo', '{}', {}), status: 400, code: 'request.unsupported_media_type' },
    {
      name: 'declared body over 1 MiB',
      head: `POST /echo HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: ${2 * MiB}\r\n\r\n{"a":`,
      status: 413,
      code: 'request.body_too_large',
    },
    {
      name: 'chunked body over 1 MiB',
      head: 'POST /echo HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n',
      chunks: Array.from({ length: 40 }, () => `10000\r\n${'x'.repeat(0x10000)}\r\n`),
      status: 413,
      code: 'request.body_too_large',
    },
    {
      name: "body over the route's own limit",
      head: post('/small', JSON.stringify({ a: 'x'.repeat(32) }), JSON_CT),
      status: 413,
      code: 'request.body_too_large',
    },
    { name: 'unknown route', head: get('/api/v1/nothing'), status: 404, code: 'route.not_found' },
    {
      name: 'wrong method',
      head: get('/echo'),
      status: 405,
      code: 'route.method_not_allowed',
      check: (r) => assert.equal(r.headers.allow, 'POST'),
    },
    {
      name: 'query: not an integer',
      head: get('/q?limit=abc'),
      status: 400,
      code: 'request.invalid',
      check: (r) => assert.match(r.body, /limit/),
    },
    {
      name: 'query: out of range',
      head: get('/q?limit=0'),
      status: 400,
      code: 'request.invalid',
      check: (r) => assert.match(r.body, /limit/),
    },
    { name: 'query: repeated', head: get('/q?limit=1&limit=2'), status: 400, code: 'request.invalid' },
    {
      name: 'query: not in the enum',
      head: get('/q?state=sleeping'),
      status: 400,
      code: 'request.invalid',
      check: (r) => assert.match(r.body, /state/),
    },
    { name: 'invalid percent-encoding', head: post('/items/%E0%A4%A', '{}', JSON_CT), status: 400, code: 'request.invalid' },
    { name: 'invalid percent escape', head: post('/items/%zz', '{}', JSON_CT), status: 400, code: 'request.invalid' },
    { name: 'dot segment', head: get('/echo/../healthz'), status: 400, code: 'request.invalid' },
    { name: 'huge URL (20 KiB)', head: get(`/q?pad=${'a'.repeat(20 * 1024)}`), status: 400, code: 'request.invalid' },
    { name: 'huge header (20 KiB)', head: get('/healthz', `x-pad: ${'b'.repeat(20 * 1024)}\r\n`), status: 400, code: 'request.invalid' },
    {
      name: 'body that never completes (route deadline 300 ms)',
      head: 'POST /slow HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"a":',
      status: 400,
      code: 'request.invalid',
      check: (r) => assert.match(r.body, /not received within 300 ms/),
    },
    {
      name: 'handler throws a plain Error',
      head: get('/boom'),
      status: 500,
      code: 'server.internal',
      check: (r) => assert.doesNotMatch(r.body, /hunter2/),
    },
  ];

  for (const row of table) {
    void test(row.name, async () => {
      const res = await exchange(port, row.head, row.chunks);
      assert.ok(res, 'expected a response');
      assert.equal(res.status, row.status);
      assert.match(res.headers['content-type'] ?? '', /^application\/json/);
      const body = JSON.parse(res.body) as { error: { code: string; message: string } };
      assert.deepEqual(Object.keys(body), ['error']);
      assert.equal(body.error.code, row.code);
      assert.equal(typeof body.error.message, 'string');
      row.check?.(res);
    });
  }

  void test('a handler failure is logged and counted', async () => {
    assert.ok(logLines.some((l) => l.includes('hunter2') && l.includes('/boom')));
    const text = await metrics.registry.metrics();
    assert.match(text, /^svc_errors_logged_total\{component="http"\} [1-9]/m);
    assert.match(text, /^svc_http_errors_total\{code="server.internal"\} [1-9]/m);
  });

  void test('a client that disconnects mid-body is noticed and the handler never runs', async () => {
    const before = handled.length;
    await sendAndDrop(port, ['POST /echo HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"a":"'], 50);
    await waitFor('the dropped /echo request to be counted as aborted', () => infos.some((i) => i.route === '/echo' && i.aborted), {
      deadlineMs: DEADLINE_MS.local,
      intervalMs: 20,
      lastState: () => JSON.stringify(infos.slice(-5)),
    });
    const info = infos.find((i) => i.route === '/echo' && i.aborted);
    assert.equal(info?.status, 0);
    assert.equal(handled.length, before);
  });

  void test('a slowloris-style trickled body that then aborts is noticed', async () => {
    const count = infos.filter((i) => i.route === '/trickle' && i.aborted).length;
    const trickle = [
      'POST /trickle HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\n',
      'content-length: 50\r\n\r\n',
      '{',
      '"',
      'a',
      '"',
    ];
    await sendAndDrop(port, trickle, 40);
    await waitFor(
      'the dropped /trickle request to be counted as aborted',
      () => infos.filter((i) => i.route === '/trickle' && i.aborted).length > count,
      { deadlineMs: DEADLINE_MS.local, intervalMs: 20, lastState: () => JSON.stringify(infos.slice(-5)) },
    );
    assert.ok(!handled.includes('trickle'));
  });

  void test('headers beyond what uWS parses close the connection without a response', async () => {
    const res = await exchange(port, get('/healthz', `x-pad: ${'c'.repeat(1024 * 1024)}\r\n`));
    assert.equal(res, null);
  });

  void test('after all of the above, /healthz still answers', async () => {
    const res = await exchange(port, get('/healthz'));
    assert.equal(res?.status, 200);
    assert.deepEqual(JSON.parse(res?.body ?? ''), { status: 'ok' });
  });
});
