/**
 * VMs with their real agents: startServer with the agents component and its mTLS gRPC
 * listener, the hypervisor and the VM component, in one worker-shard ActorSystem; every local
 * sandbox-agent dials the listener with the certificate provisioning issued, and "agent
 * connected" comes from the agents registry (registryAgentLookup), not from a stand-in.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import type { AgentService } from '../../src/agent-link/agent-service.js';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { loadConfig } from '../../src/config/load.js';
import { eventsComponent } from '../../src/events/component.js';
import { inject, type InjectResponse } from '../../src/http/inject.js';
import type { Router } from '../../src/http/router.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { actorsComponent, hypervisorComponent } from '../../src/server/runtime-components.js';
import { vmsComponent } from '../../src/vms/component.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { uniqueName } from './vms-harness.js';

type Json = Record<string, unknown>;

describe('VMs with real agents over mTLS gRPC', () => {
  let dir: string;
  let server: ServerHandle;
  let agents: AgentService;
  let router: Router;
  const req = (method: string, url: string, body?: unknown): Promise<InjectResponse> =>
    inject(router, { method, url, ...(body !== undefined ? { body } : {}) });
  const operation = async (id: string): Promise<Json> => (await req('GET', `/api/v1/operations/${id}`)).json() as Json;
  const waitOp = (id: string, deadlineMs: number = DEADLINE_MS.endToEnd): Promise<Json> =>
    waitFor(
      `operation ${id} to finish`,
      async () => {
        const op = await operation(id);
        return op['status'] === 'completed' || op['status'] === 'failed' ? op : undefined;
      },
      { deadlineMs, intervalMs: 100, lastState: async () => JSON.stringify(await operation(id)) },
    );
  const waitUntil = (what: string, cond: () => boolean): Promise<true> =>
    waitFor(what, cond, { deadlineMs: DEADLINE_MS.process, intervalMs: 50 });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-vms-agents-'));
    const config = loadConfig({
      SVC_STATE_DIR: dir,
      SVC_GRPC_ADDR: '127.0.0.1:0',
      SVC_ADMIN_ADDR: '127.0.0.1:0',
      SVC_ACTORS: 'workers',
      SVC_ACTOR_SHARDS: '2',
      SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000',
      // Twenty agents start at once beside the libvirt calls on libuv's four pool threads: on a
      // loaded two-core machine a read can queue past the 2 s default budget, which would open the
      // circuit. The budget is not what this file tests (hypervisor-circuit does).
      SVC_HYPERVISOR_READ_BUDGET_MS: '20000',
      LOG_LEVEL: 'silent',
    });
    server = await startServer(config, pino({ level: 'silent' }), {
      components: [
        eventsComponent(),
        actorsComponent,
        agentsComponent,
        agentListenerComponent,
        hypervisorComponent,
        vmsComponent({ agentConnectTimeoutMs: 90_000 }),
      ],
    });
    agents = server.agents;
    router = server.router;
  });

  after(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('create → agent connected (registry) → stop → disconnected → start → reconnected → deploy-agent → delete', async () => {
    const name = uniqueName('real');
    const r = await req('POST', '/api/v1/vms', { name, vcpus: 1, memory_mb: 512 });
    assert.equal(r.status, 202, r.text);
    const op = await waitOp(String((r.json() as { operation: Json }).operation['id']));
    assert.equal(op['status'], 'completed', JSON.stringify(op));
    const detail = (await req('GET', `/api/v1/vms/${name}`)).json() as Json;
    const agent = detail['agent'] as Json;
    assert.equal(agent['connected'], true);
    assert.equal(typeof agent['hostname'], 'string');
    const reg = agents.registry.get(name);
    assert.equal(reg?.instance_id, detail['uuid'], 'the agent registered with the VM uuid as its instance id');
    const firstConnectedAt = Number(agent['connected_at']);

    assert.equal((await req('POST', `/api/v1/vms/${name}/stop`)).status, 200);
    await waitUntil('agent Disconnected', () => agents.registry.get(name)?.status === 'Disconnected');
    assert.equal((((await req('GET', `/api/v1/vms/${name}`)).json() as Json)['agent'] as Json)['connected'], false);

    assert.equal((await req('POST', `/api/v1/vms/${name}/start`)).status, 200);
    await waitUntil(
      'agent back',
      () => agents.registry.get(name)?.status !== 'Disconnected' && (agents.registry.get(name)?.connected_at ?? 0) > firstConnectedAt,
    );

    const before = agents.registry.get(name)!.connected_at;
    const d = await req('POST', `/api/v1/vms/${name}/deploy-agent`);
    const dop = await waitOp(String((d.json() as { operation: Json }).operation['id']));
    assert.equal(dop['status'], 'completed', JSON.stringify(dop));
    assert.ok(agents.registry.get(name)!.connected_at > before, 'deploy-agent waited for the new agent connection');

    assert.equal((await req('DELETE', `/api/v1/vms/${name}?force=true&delete_disk=true`)).status, 200);
    await waitUntil('agent gone after delete', () => agents.registry.get(name)?.status === 'Disconnected');
  });

  test('20 VMs created in parallel all reach running with their agents connected', async () => {
    const names = Array.from({ length: 20 }, (_, i) => `agent-real20-${i}-${Math.random().toString(36).slice(2, 6)}`);
    const t0 = performance.now();
    const accepted = await Promise.all(names.map((name) => req('POST', '/api/v1/vms', { name, vcpus: 1, memory_mb: 256 })));
    for (const r of accepted) assert.equal(r.status, 202, r.text);
    const ops = await Promise.all(accepted.map((r) => waitOp(String((r.json() as { operation: Json }).operation['id']), 180_000)));
    const ms = performance.now() - t0;
    for (const op of ops) assert.equal(op['status'], 'completed', JSON.stringify(op));
    const running = (await req('GET', '/api/v1/vms?state=running&prefix=agent-real20-')).json() as { total: number };
    assert.equal(running.total, 20);
    for (const n of names) {
      assert.equal((((await req('GET', `/api/v1/vms/${n}`)).json() as Json)['agent'] as Json)['connected'], true, n);
      assert.notEqual(agents.registry.get(n)?.status, 'Disconnected');
    }
    process.stdout.write(`# 20 VMs create-to-agent-connected in parallel (real mTLS agents, workers): ${ms.toFixed(0)} ms\n`);
    const dels = await Promise.all(names.map((n) => req('DELETE', `/api/v1/vms/${n}?force=true&delete_disk=true`)));
    for (const r of dels) assert.equal(r.status, 200, r.text);
  });
});
