/**
 * The spec 4.1 routes over the real uWS listener (fetch on loopback), and the listener's
 * lifecycle: port 0, HEAD, 503 for requests that arrive while it stops, bounded close().
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { registerHealthRoutes } from '../../src/server/health.js';
import { registerMetricsRoute } from '../../src/server/metrics.js';
import { Router } from '../../src/http/router.js';
import { startHttpListener, uwsRuntimeInfo, type HttpListener } from '../../src/http/uws-server.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { RawConnection, rawGet } from './http-raw-client.js';

const logger = pino({ level: 'silent' });

void describe('spec 4.1 routes over uWS', () => {
  let listener: HttpListener;
  let base: string;
  let ready = { ready: true, reason: 'ok' };
  const metrics = createMetrics();

  before(async () => {
    const router = new Router();
    registerHealthRoutes(router, {
      readiness: () => ready,
      startedAtMs: Date.now() - 3_000,
      agentCount: () => 7,
      activeTasks: () => 2,
      uws: uwsRuntimeInfo,
      actors: () => ({ mode: 'workers', shards: 1, restarts: 0 }),
    });
    registerMetricsRoute(router, metrics);
    listener = await startHttpListener({ host: '127.0.0.1', port: 0, router, logger, metrics });
    base = `http://127.0.0.1:${listener.port}`;
  });

  after(() => listener.close());

  void test('port 0 binds a real port', () => {
    assert.ok(listener.port > 0 && listener.port < 65536);
  });

  void test('the native uWS binary is loaded on this Node', () => {
    assert.equal(uwsRuntimeInfo().native, true, uwsRuntimeInfo().detail);
  });

  void test('GET /healthz and /api/v1/health → 200 {status: ok}', async () => {
    for (const path of ['/healthz', '/api/v1/health']) {
      const res = await fetch(base + path);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      assert.deepEqual(await res.json(), { status: 'ok' });
    }
  });

  void test('GET /readyz → 200 when ready, 503 {ready: false, reason} when not', async () => {
    let res = await fetch(`${base}/readyz`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ready: true, reason: 'ok' });
    ready = { ready: false, reason: 'shutting down' };
    res = await fetch(`${base}/readyz`);
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), { ready: false, reason: 'shutting down' });
    ready = { ready: true, reason: 'ok' };
  });

  void test('GET /healthz/deep → integers for uptime, agents and tasks, plus uws and actors', async () => {
    const body = (await (await fetch(`${base}/healthz/deep`)).json()) as Record<string, unknown>;
    assert.equal(body.status, 'ok');
    assert.ok(Number.isInteger(body.uptime_seconds) && (body.uptime_seconds as number) >= 3);
    assert.equal(body.agent_count, 7);
    assert.equal(body.active_tasks, 2);
    assert.deepEqual(body.uws, uwsRuntimeInfo());
    assert.deepEqual(body.actors, { mode: 'workers', shards: 1, restarts: 0 });
  });

  void test('GET /metrics → Prometheus text that counts the requests above by route pattern', async () => {
    const res = await fetch(`${base}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    assert.match(text, /^svc_http_requests_total\{route="\/healthz",status_class="2xx"\} [1-9]/m);
    assert.match(text, /^svc_http_requests_total\{route="\/readyz",status_class="5xx"\} 1$/m);
  });

  void test('HEAD gets the headers and length of GET without a body', async () => {
    const res = await fetch(`${base}/healthz`, { method: 'HEAD' });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-length'), String('{"status":"ok"}'.length));
    assert.equal(await res.text(), '');
  });
});

void describe('listener stop', () => {
  void test('requests arriving while it stops get 503 server.not_ready; in-flight ones finish', async () => {
    const router = new Router();
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    router.add({ method: 'GET', path: '/ok', handler: () => ({ status: 200, json: { ok: true } }) });
    let holding = false;
    router.add({
      method: 'GET',
      path: '/hold',
      handler: async () => {
        holding = true;
        await held;
        return { status: 200, json: { held: true } };
      },
    });
    const listener = await startHttpListener({ host: '127.0.0.1', port: 0, router, logger, closeGraceMs: 5_000 });

    const keepAlive = await RawConnection.open(listener.port);
    keepAlive.write(rawGet('/ok'));
    assert.equal((await keepAlive.response())?.status, 200);
    const inFlight = await RawConnection.open(listener.port);
    inFlight.write(rawGet('/hold'));
    await waitFor('the /hold request to reach its handler', () => holding, { deadlineMs: DEADLINE_MS.local });

    const closing = listener.close();
    keepAlive.write(rawGet('/ok'));
    const refused = await keepAlive.response();
    assert.equal(refused?.status, 503);
    assert.deepEqual(JSON.parse(refused?.body ?? ''), { error: { code: 'server.not_ready', message: 'the server is shutting down' } });
    assert.ok(await keepAlive.waitClosed(), 'the refused connection is closed');

    release();
    const finished = await inFlight.response();
    assert.equal(finished?.status, 200);
    await closing;
    await assert.rejects(fetch(`http://127.0.0.1:${listener.port}/ok`));
    keepAlive.destroy();
    inFlight.destroy();
  });

  void test('close() is bounded when a handler never finishes, and is idempotent', async () => {
    const router = new Router();
    let stuck = false;
    router.add({
      method: 'GET',
      path: '/stuck',
      handler: () => {
        stuck = true;
        return new Promise(() => undefined);
      },
    });
    const listener = await startHttpListener({ host: '127.0.0.1', port: 0, router, logger, closeGraceMs: 300 });
    const conn = await RawConnection.open(listener.port);
    conn.write(rawGet('/stuck'));
    await waitFor('the /stuck request to reach its handler', () => stuck, { deadlineMs: DEADLINE_MS.local });
    const started = Date.now();
    await Promise.all([listener.close(), listener.close()]);
    assert.ok(Date.now() - started < 5_000);
    assert.equal(await conn.response(), null, 'the stuck request is cut off without a response');
  });

  void test('a port in use is a rejected start, not a crash', async () => {
    const first = await startHttpListener({ host: '127.0.0.1', port: 0, router: new Router(), logger });
    try {
      await assert.rejects(startHttpListener({ host: '127.0.0.1', port: first.port, router: new Router(), logger }), /cannot listen/);
    } finally {
      await first.close();
    }
  });
});
