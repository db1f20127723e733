/**
 * Agent routes (spec 4.2) through the router without sockets: the list envelope, reprovision
 * (202 queued, 404 for an unknown agent, the operation failing until the VM layer exists, and
 * completing with one) and the retired rotate-secret (410 envelope).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { AgentSnapshot } from '../../../actors/agent/frames.js';
import { AgentRegistry } from '../../../src/agents/agent-registry.js';
import { REPROVISION_NEEDS_VM_LAYER, ReprovisionOperations } from '../../../src/agents/reprovision.js';
import { registerAgentRoutes } from '../../../src/api/agents.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

function setup(): { router: Router; registry: AgentRegistry; ops: ReprovisionOperations } {
  const registry = new AgentRegistry();
  const ops = new ReprovisionOperations({ logger: quiet });
  const router = new Router();
  registerAgentRoutes(router, { registry, operations: ops });
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
  return { router, registry, ops };
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

void describe('agent routes', () => {
  void test('GET /api/v1/agents returns {agents} in the spec shape, without our fields', async () => {
    const { router } = setup();
    const res = await inject(router, { method: 'GET', url: '/api/v1/agents' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { agents: [{ id: 'agent-a', hostname: 'h', ip_address: '10.0.0.2', status: 'Ready', connected_at: 1, last_heartbeat: 2 }] });
  });

  void test('POST reprovision: 202 {operation_id, status: queued}; the operation fails until the VM layer exists', async () => {
    const { router, ops } = setup();
    const res = await inject(router, { method: 'POST', url: '/api/v1/agents/agent-a/reprovision' });
    assert.equal(res.status, 202);
    const body = res.json() as { operation_id: string; status: string };
    assert.match(body.operation_id, /^op-[0-9a-f-]{36}$/);
    assert.equal(body.status, 'queued');
    await settle();
    const op = ops.get(body.operation_id);
    assert.equal(op?.status, 'failed');
    assert.equal(op?.error, REPROVISION_NEEDS_VM_LAYER);
    assert.equal(op?.type, 'vm_create');
    assert.equal(op?.target, 'agent-a');
    assert.ok(op?.completed_at !== undefined && !Number.isNaN(Date.parse(op.completed_at)));
  });

  void test('POST reprovision with a VM layer runs it to completion', async () => {
    const { router, ops } = setup();
    ops.setBackend({
      reprovision: (agentId, report) => {
        report.progress(50);
        return Promise.resolve({ vm: { name: agentId, state: 'running' } });
      },
    });
    const res = await inject(router, { method: 'POST', url: '/api/v1/agents/agent-a/reprovision', body: {} });
    const id = (res.json() as { operation_id: string }).operation_id;
    await settle();
    await settle();
    const op = ops.get(id);
    assert.equal(op?.status, 'completed');
    assert.equal(op?.progress_percent, 100);
    assert.deepEqual(op?.result, { vm: { name: 'agent-a', state: 'running' } });
  });

  void test('POST reprovision for an unknown agent is 404 agent.not_found', async () => {
    const { router } = setup();
    const res = await inject(router, { method: 'POST', url: '/api/v1/agents/nobody/reprovision' });
    assert.equal(res.status, 404);
    assert.equal((res.json() as { error: { code: string } }).error.code, 'agent.not_found');
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
