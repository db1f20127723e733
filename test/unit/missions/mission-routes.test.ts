/**
 * The executor and mission routes resolve their caller through the one operator-identity
 * function (src/missions/routes.ts): a viewer may list executors and missions but not register or
 * delete executors; an admin may. Driven with inject() over a real store in a temporary folder.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { OperatorIdentity } from '../../../src/auth/operator-identity.js';
import type { Role } from '../../../src/auth/permissions.js';
import { EventStore } from '../../../src/events/event-store.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { MissionService } from '../../../src/missions/mission-service.js';
import { MissionStore } from '../../../src/missions/mission-store.js';
import { registerMissionRoutes } from '../../../src/missions/routes.js';

function routerAs(role: Role, service: MissionService): Router {
  const router = new Router();
  registerMissionRoutes(router, {
    service,
    identity: new OperatorIdentity({ trustDomain: 't', localRole: role, roles: () => ({ ok: true, roles: new Map() }) }),
  });
  return router;
}

test('viewers read executors and missions; only admins register and delete executors', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-mission-routes-'));
  const store = new MissionStore(dir);
  try {
    const service = new MissionService({
      store,
      events: new EventStore(),
      agent: () => undefined,
      commands: { start: () => Promise.reject(new Error('unused')) },
      missionCommand: ['true'],
      timeoutSeconds: 1,
      startWindowMs: 100,
    });
    const viewer = routerAs('viewer', service);
    const admin = routerAs('admin', service);
    const denied = await inject(viewer, { method: 'POST', url: '/api/v2/executors', body: { agent_id: 'agent-a' } });
    assert.equal(denied.status, 403);
    assert.equal((denied.json() as { error: { code: string } }).error.code, 'auth.permission_denied');
    assert.match(denied.text, /executors\.write/);

    const made = await inject(admin, { method: 'POST', url: '/api/v2/executors', body: { agent_id: 'agent-a' } });
    assert.equal(made.status, 201, made.text);
    const { executor, token } = made.json() as { executor: { executor_id: string; created_by: string }; token: string };
    assert.equal(executor.created_by, 'local');
    const typo = await inject(admin, { method: 'POST', url: '/api/v2/executors', body: { agent_id: 'agent-a', capabilites: ['x'] } });
    assert.equal(typo.status, 400, 'an unknown registration field is refused');

    const listed = await inject(viewer, { method: 'GET', url: '/api/v2/executors' });
    assert.equal(listed.status, 200);
    assert.ok(!listed.text.includes(token));
    assert.equal((listed.json() as { executors: unknown[] }).executors.length, 1);
    assert.equal((await inject(viewer, { method: 'GET', url: '/api/v2/missions' })).status, 200);
    assert.equal((await inject(viewer, { method: 'GET', url: '/api/v2/missions?status=bogus' })).status, 400);

    const del = `/api/v2/executors/${executor.executor_id}`;
    assert.equal((await inject(viewer, { method: 'DELETE', url: del })).status, 403);
    assert.equal((await inject(admin, { method: 'DELETE', url: del })).status, 200);
    assert.equal((await inject(admin, { method: 'DELETE', url: del })).status, 404);
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
