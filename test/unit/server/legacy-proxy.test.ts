import assert from 'node:assert/strict';
import { test } from 'node:test';
import { registerLegacyProxyRoutes } from '../../../src/server/legacy-proxy.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';

const CALLS = [
  ['GET', '/api/v1/agents/a1/manifests/linux'],
  ['GET', '/api/v1/agents/a1/manifests/linux/tool'],
  ['POST', '/api/v1/agents/a1/manifests/linux/tool'],
  ['POST', '/api/v1/agents/a1/aiwg/exec'],
] as const;

test('the legacy direct-SSH proxy routes are 403 unless enabled', async () => {
  const router = new Router();
  registerLegacyProxyRoutes(router, { enabled: false });
  for (const [method, url] of CALLS) {
    const r = await inject(router, { method, url });
    assert.equal(r.status, 403, `${method} ${url}`);
    assert.equal((r.json() as { error: { code: string } }).error.code, 'route.forbidden');
  }
});

test('enabled, they say there is no direct-SSH backend instead of pretending the route is missing', async () => {
  const router = new Router();
  registerLegacyProxyRoutes(router, { enabled: true });
  for (const [method, url] of CALLS) {
    const r = await inject(router, { method, url });
    assert.equal(r.status, 503, `${method} ${url}`);
    assert.equal((r.json() as { error: { code: string } }).error.code, 'server.unavailable');
  }
});
