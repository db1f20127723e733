import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { registerHealthRoutes, type HealthDeps } from '../../../src/server/health.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';

function setup(over: Partial<HealthDeps> = {}): Router {
  const deps: HealthDeps = {
    readiness: () => ({ ready: true, reason: 'ok' }),
    startedAtMs: 1_000_000,
    nowMs: () => 1_000_000 + 61_900,
    agentCount: () => 4,
    activeTasks: () => Promise.resolve(2),
    uws: () => ({ native: true, detail: 'native' }),
    actors: () => ({ mode: 'workers', shards: 3, restarts: 1 }),
    ...over,
  };
  const router = new Router();
  registerHealthRoutes(router, deps);
  return router;
}

void describe('health routes', () => {
  void test('liveness routes answer {status: ok}', async () => {
    const r = setup({ readiness: () => ({ ready: false, reason: 'starting' }) });
    for (const url of ['/healthz', '/api/v1/health']) {
      const res = await inject(r, { method: 'GET', url });
      assert.equal(res.status, 200);
      assert.deepEqual(res.json(), { status: 'ok' });
    }
  });

  void test('/readyz is 200 when ready and 503 with the reason when not', async () => {
    assert.deepEqual((await inject(setup(), { method: 'GET', url: '/readyz' })).json(), { ready: true, reason: 'ok' });
    const res = await inject(setup({ readiness: () => ({ ready: false, reason: 'actors starting' }) }), { method: 'GET', url: '/readyz' });
    assert.equal(res.status, 503);
    assert.deepEqual(res.json(), { ready: false, reason: 'actors starting' });
  });

  void test('/healthz/deep reports the spec fields plus uws and actors', async () => {
    const res = await inject(setup(), { method: 'GET', url: '/healthz/deep' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), {
      status: 'ok',
      uptime_seconds: 61,
      agent_count: 4,
      active_tasks: 2,
      ready: true,
      uws: { native: true, detail: 'native' },
      actors: { mode: 'workers', shards: 3, restarts: 1 },
      degraded_reasons: [],
    });
  });

  void test('/healthz/deep is degraded on the uWS fallback and says why', async () => {
    const res = await inject(setup({ uws: () => ({ native: false, detail: 'JS fallback' }) }), { method: 'GET', url: '/healthz/deep' });
    const body = res.json() as { status: string; degraded_reasons: string[] };
    assert.equal(body.status, 'degraded');
    assert.match(body.degraded_reasons[0] ?? '', /fallback/);
  });

  void test('/healthz/hypervisor is not registered here', async () => {
    assert.equal((await inject(setup(), { method: 'GET', url: '/healthz/hypervisor' })).status, 404);
  });
});
