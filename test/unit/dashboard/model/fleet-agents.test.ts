import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FleetAgents, LIVE_FRESH_MS, type AgentInput } from '../../../../src/dashboard/model/fleet-agents.js';
import { cpuSeries } from '../../../../src/dashboard/model/metrics-history.js';
import type { MetricsMessage } from '../../../../src/dashboard/model/live-messages.js';

function agent(id: string, over: Partial<AgentInput> = {}): AgentInput {
  return { id, hostname: `${id}.local`, ip_address: '10.0.0.1', status: 'Ready', connected_at: 1000, last_heartbeat: 5000, ...over };
}
function metrics(id: string, timestamp: number, cpu: number): MetricsMessage {
  return {
    type: 'metrics',
    agent_id: id,
    cpu_percent: cpu,
    memory_used_bytes: 1,
    memory_total_bytes: 2,
    disk_used_bytes: 0,
    disk_total_bytes: 0,
    load_avg: [0.1],
    timestamp,
  };
}
const polledMetrics = {
  cpu_percent: 5,
  memory_used_bytes: 1,
  memory_total_bytes: 2,
  disk_used_bytes: 3,
  disk_total_bytes: 4,
  load_avg: [1, 2, 3],
  uptime_seconds: 60,
};

describe('dashboard fleet agents', () => {
  test('a polled list sets the agents; ids that changed or left are reported', () => {
    const f = new FleetAgents();
    assert.equal(f.loaded, false);
    assert.deepEqual([...f.applyList([agent('b'), agent('a')], 100)].sort(), ['a', 'b']);
    assert.equal(f.loaded, true);
    assert.deepEqual(
      f.rows().map((r) => r.agent.id),
      ['a', 'b'],
    );
    assert.deepEqual([...f.applyList([agent('a'), agent('b')], 200)], []);
    assert.deepEqual([...f.applyList([agent('a', { status: 'Busy' })], 300)].sort(), ['a', 'b']);
    assert.equal(f.size, 1);
    assert.deepEqual([...f.countByStatus()], [['Busy', 1]]);
  });

  test('live metrics update a row; an older measurement is ignored', () => {
    const f = new FleetAgents();
    f.applyList([agent('a')], 0);
    assert.equal(f.applyMetrics(metrics('a', 10_000, 40), 100_000), true);
    assert.equal(f.applyMetrics(metrics('a', 9_000, 99), 100_500), false);
    assert.equal(f.get('a')?.metrics?.cpuPercent, 40);
    assert.equal(f.applyMetrics(metrics('ghost', 10_000, 1), 100_600), false);
    // A poll whose metrics are older than the live ones does not roll them back.
    f.applyList([agent('a', { metrics: polledMetrics, last_heartbeat: 9_500 })], 101_000);
    assert.equal(f.get('a')?.metrics?.cpuPercent, 40);
    f.applyList([agent('a', { metrics: polledMetrics, last_heartbeat: 11_000 })], 102_000);
    assert.equal(f.get('a')?.metrics?.cpuPercent, 5);
  });

  test('the history: a sample per live message; polls fill in while no live data comes; Disconnected is a gap', () => {
    const f = new FleetAgents();
    f.applyList([agent('a', { metrics: polledMetrics })], 1000);
    f.applyMetrics(metrics('a', 6000, 40), 2000);
    f.applyList([agent('a', { metrics: polledMetrics, last_heartbeat: 6500 })], 3000);
    f.applyList([agent('a', { metrics: { ...polledMetrics, cpu_percent: 7 }, last_heartbeat: 7000 })], 2000 + LIVE_FRESH_MS + 1);
    f.applyList([agent('a', { status: 'Disconnected', metrics: polledMetrics, last_heartbeat: 7000 })], 30_000);
    const cpu = cpuSeries(f.history.samples('a'));
    assert.deepEqual(cpu.slice(0, 3), [5, 40, 7]);
    assert.ok(cpu.length === 4 && Number.isNaN(cpu[3]));
  });

  test('a live status wins over a poll sent before it arrived, not over a later one', () => {
    const f = new FleetAgents();
    f.applyList([agent('a', { status: 'Ready' })], 1000);
    assert.equal(f.applyStatus({ type: 'agent_status', agent_id: 'a', status: 'Busy', timestamp: 1 }, 2000), true);
    f.applyList([agent('a', { status: 'Ready' })], 1500); // sent before the live message arrived
    assert.equal(f.get('a')?.status, 'Busy');
    f.applyList([agent('a', { status: 'Stale' })], 2500); // sent after
    assert.equal(f.get('a')?.status, 'Stale');
    assert.equal(f.applyStatus({ type: 'agent_status', agent_id: 'nobody', status: 'Ready', timestamp: 1 }, 3000), false);
  });

  test('agents that leave the list leave the history too', () => {
    const f = new FleetAgents();
    f.applyList([agent('a', { metrics: polledMetrics })], 0);
    assert.equal(f.history.agentCount, 1);
    f.applyList([], 1);
    assert.equal(f.history.agentCount, 0);
  });
});
