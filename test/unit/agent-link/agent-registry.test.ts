/**
 * The main thread's agent read model: the spec's Agent shape exactly (ours stripped), sorted
 * listing, and svc_agents_connected / svc_agents_by_status kept in step with every change.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { AgentSnapshot } from '../../../actors/protocol/agent-frames.js';
import { AgentRegistry, type AgentChange } from '../../../src/agent-link/agent-registry.js';
import { createMetrics } from '../../../src/observability/metrics.js';

function snapshot(id: string, status: string, extra: Partial<AgentSnapshot> = {}): AgentSnapshot {
  return {
    id,
    hostname: `${id}.local`,
    ip_address: '10.0.0.9',
    status,
    connected_at: 1_700_000_000_000,
    last_heartbeat: 1_700_000_001_000,
    instance_id: `i-${id}`,
    profile: 'basic',
    labels: { a: 'b' },
    agent_version: '1.0.0',
    running_commands: 0,
    disconnected_at: null,
    ...extra,
  };
}

async function gauge(metrics: ReturnType<typeof createMetrics>, name: string, status?: string): Promise<number> {
  const m = await metrics.registry.getSingleMetric(name)!.get();
  const v = m.values.find((x) => status === undefined || x.labels['status'] === status);
  return v?.value ?? Number.NaN;
}

void describe('AgentRegistry', () => {
  void test('list() gives the spec Agent fields only, sorted by id; optional objects only when known', () => {
    const r = new AgentRegistry();
    r.apply(
      snapshot('b', 'Ready', {
        metrics: {
          cpu_percent: 1,
          memory_used_bytes: 2,
          memory_total_bytes: 3,
          disk_used_bytes: 4,
          disk_total_bytes: 5,
          load_avg: [1, 2, 3],
          uptime_seconds: 6,
        },
      }),
    );
    r.apply(snapshot('a', 'Starting', { system_info: { os: 'Linux', kernel: '6', cpu_cores: 2, memory_bytes: 1, disk_bytes: 1 } }));
    const list = r.list();
    assert.deepEqual(
      list.map((a) => a.id),
      ['a', 'b'],
    );
    assert.deepEqual(list[0], {
      id: 'a',
      hostname: 'a.local',
      ip_address: '10.0.0.9',
      status: 'Starting',
      connected_at: 1_700_000_000_000,
      last_heartbeat: 1_700_000_001_000,
      system_info: { os: 'Linux', kernel: '6', cpu_cores: 2, memory_bytes: 1, disk_bytes: 1 },
    });
    assert.deepEqual(Object.keys(list[1]!), ['id', 'hostname', 'ip_address', 'status', 'connected_at', 'last_heartbeat', 'metrics']);
    assert.equal(r.get('b')?.instance_id, 'i-b', 'our fields stay available to the server');
  });

  void test('the gauges follow every status change, removal and main-side disconnect', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const r = new AgentRegistry({ metrics });
    r.apply(snapshot('a', 'Starting'));
    r.apply(snapshot('b', 'Ready'));
    r.apply(snapshot('a', 'Ready'));
    assert.equal(await gauge(metrics, 'svc_agents_connected'), 2);
    assert.equal(await gauge(metrics, 'svc_agents_by_status', 'Ready'), 2);
    assert.equal(await gauge(metrics, 'svc_agents_by_status', 'Starting'), 0);
    r.apply(snapshot('a', 'Stale'));
    assert.equal(await gauge(metrics, 'svc_agents_connected'), 2, 'a Stale agent still has its stream');
    assert.equal(r.markDisconnected('b', 5)?.disconnected_at, 5);
    assert.equal(r.markDisconnected('b', 6), undefined, 'already disconnected');
    assert.equal(await gauge(metrics, 'svc_agents_connected'), 1);
    assert.equal(await gauge(metrics, 'svc_agents_by_status', 'Disconnected'), 1);
    assert.equal(r.remove('b'), true);
    assert.equal(r.remove('b'), false);
    assert.equal(await gauge(metrics, 'svc_agents_by_status', 'Disconnected'), 0);
    assert.deepEqual(r.countsByStatus(), { Starting: 0, Ready: 0, Busy: 0, Error: 0, ShuttingDown: 0, Stale: 1, Disconnected: 0 });
    assert.equal(r.connectedCount(), 1);
  });

  void test('a snapshot with an unknown status is ignored; subscribers see updates and removals', () => {
    const r = new AgentRegistry();
    const changes: AgentChange[] = [];
    r.subscribe((c) => changes.push(c));
    assert.equal(r.apply(snapshot('a', 'Sleeping')), false);
    assert.equal(r.size, 0);
    r.apply(snapshot('a', 'Ready'));
    r.apply(snapshot('a', 'Busy'));
    r.remove('a');
    assert.deepEqual(
      changes.map((c) => (c.kind === 'updated' ? `${c.previousStatus ?? '-'}>${c.agent.status}` : 'removed')),
      ['->Ready', 'Ready>Busy', 'removed'],
    );
  });
});
