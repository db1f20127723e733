/**
 * Agent routes (spec 4.2) through the router without sockets: the list envelope, reprovision
 * (202 with the VM feature's operation id, 404 for an unknown agent; the operation itself is
 * tested with the VM queue, test/integration/vms-queue.test.ts) and the retired rotate-secret
 * (410 envelope).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { AgentSnapshot } from '../../../actors/protocol/agent-frames.js';
import { AgentRegistry } from '../../../src/agent-link/agent-registry.js';
import { registerAgentRoutes } from '../../../src/agent-link/routes.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';

function setup(): { router: Router; registry: AgentRegistry; reprovisioned: string[] } {
  const registry = new AgentRegistry();
  const reprovisioned: string[] = [];
  const router = new Router();
  registerAgentRoutes(router, {
    registry,
    reprovision: (agentId) => {
      reprovisioned.push(agentId);
      return Promise.resolve({ operation_id: `op-00000000-0000-4000-8000-00000000000${reprovisioned.length}`, status: 'queued' });
    },
  });
  const snap: AgentSnapshot = {
    id: 'agent-a',
    hostname: 'h',
    ip_address: '10.0.0.2',
    status: 'Ready',
    connected_at: 1,
    last_heartbeat: 2,
    instance_id: 'i-a',
    profile: 'p',
    labels: {},
    agent_version: 'v',
    running_commands: 0,
    disconnected_at: null,
  };
  registry.apply(snap);
  return { router, registry, reprovisioned };
}

void describe('agent routes', () => {
  void test('GET /api/v1/agents returns {agents} in the spec shape, without our fields', async () => {
    const { router } = setup();
    const res = await inject(router, { method: 'GET', url: '/api/v1/agents' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), {
      agents: [{ id: 'agent-a', hostname: 'h', ip_address: '10.0.0.2', status: 'Ready', connected_at: 1, last_heartbeat: 2 }],
    });
  });

  void test('POST reprovision: 202 {operation_id, status: queued} with the operation the VM feature queued', async () => {
    const { router, reprovisioned } = setup();
    const res = await inject(router, { method: 'POST', url: '/api/v1/agents/agent-a/reprovision', body: {} });
    assert.equal(res.status, 202);
    assert.deepEqual(res.json(), { operation_id: 'op-00000000-0000-4000-8000-000000000001', status: 'queued' });
    assert.deepEqual(reprovisioned, ['agent-a']);
  });

  void test('POST reprovision for an unknown agent is 404 agent.not_found', async () => {
    const { router, reprovisioned } = setup();
    const res = await inject(router, { method: 'POST', url: '/api/v1/agents/nobody/reprovision' });
    assert.equal(res.status, 404);
    assert.equal((res.json() as { error: { code: string } }).error.code, 'agent.not_found');
    assert.deepEqual(reprovisioned, [], 'nothing is queued');
  });

  void test('POST rotate-secret is 410 with the route.retired envelope', async () => {
    const { router } = setup();
    for (const id of ['agent-a', 'nobody']) {
      const res = await inject(router, { method: 'POST', url: `/api/v1/agents/${id}/rotate-secret`, body: { anything: true } });
      assert.equal(res.status, 410);
      const body = res.json() as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'route.retired');
      assert.match(body.error.message, /mTLS/);
    }
  });
});
