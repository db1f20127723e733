/**
 * Agent lifecycle with the real server (in-process, loopback, mTLS) and real sandbox-agent
 * processes: register → Ready with the spec's exact Agent shape; kill -9 → Disconnected and the
 * events; stopped heartbeats (SIGSTOP) → Stale, SIGCONT → Ready; restart → Ready again; and
 * removal after the retention period.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  agentCerts,
  agentOf,
  eventsOf,
  execCollect,
  killAll,
  operatorClient,
  spawnAgent,
  startTestServer,
  waitFor,
  waitForStatus,
  type AgentProcess,
  type TestServer,
} from './agents-harness.js';

const INTEGER_FIELDS = ['connected_at', 'last_heartbeat'];

function assertAgentShape(a: Record<string, unknown>): void {
  assert.deepEqual(Object.keys(a).sort(), [
    'connected_at',
    'hostname',
    'id',
    'ip_address',
    'last_heartbeat',
    'metrics',
    'status',
    'system_info',
  ]);
  for (const k of ['id', 'hostname', 'ip_address', 'status']) assert.equal(typeof a[k], 'string', k);
  for (const k of INTEGER_FIELDS) assert.ok(Number.isSafeInteger(a[k]) && (a[k] as number) > 1_600_000_000_000, `${k} is Unix ms`);
  const m = a['metrics'] as Record<string, unknown>;
  assert.deepEqual(Object.keys(m).sort(), [
    'cpu_percent',
    'disk_total_bytes',
    'disk_used_bytes',
    'load_avg',
    'memory_total_bytes',
    'memory_used_bytes',
    'uptime_seconds',
  ]);
  assert.equal(typeof m['cpu_percent'], 'number');
  for (const k of ['memory_used_bytes', 'memory_total_bytes', 'disk_used_bytes', 'disk_total_bytes', 'uptime_seconds'])
    assert.ok(Number.isSafeInteger(m[k]), `metrics.${k} is an integer`);
  assert.ok((m['memory_total_bytes'] as number) > 0);
  assert.ok(Array.isArray(m['load_avg']) && m['load_avg'].length === 3 && m['load_avg'].every((x) => typeof x === 'number'));
  const s = a['system_info'] as Record<string, unknown>;
  assert.deepEqual(Object.keys(s).sort(), ['cpu_cores', 'disk_bytes', 'kernel', 'memory_bytes', 'os']);
  assert.equal(typeof s['os'], 'string');
  assert.equal(typeof s['kernel'], 'string');
  for (const k of ['cpu_cores', 'memory_bytes', 'disk_bytes'])
    assert.ok(Number.isSafeInteger(s[k]) && (s[k] as number) > 0, `system_info.${k}`);
}

async function metricValue(ts: TestServer, line: string): Promise<number | undefined> {
  const res = await fetch(`http://127.0.0.1:${ts.server.ports.http}/metrics`);
  const text = await res.text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

void describe('agent lifecycle (real agents, heartbeat 1 s, stale after 3 s)', () => {
  let ts: TestServer;
  const procs: AgentProcess[] = [];
  before(async () => {
    ts = await startTestServer({
      SVC_AGENT_HEARTBEAT_SECONDS: '1',
      SVC_AGENT_STALE_AFTER_SECONDS: '3',
      SVC_AGENT_RETENTION_SECONDS: '600',
    });
  });
  after(async () => {
    await killAll(procs);
    await ts.stop();
  });

  function start(agentId: string, instanceId: string, certs: string): AgentProcess {
    const p = spawnAgent({ server: ts.grpcTarget, certs, agentId, instanceId, workDir: ts.dir });
    procs.push(p);
    return p;
  }

  void test('a registered agent is listed Ready with the spec Agent shape, and kill -9 makes it Disconnected', async () => {
    const certs = await agentCerts(ts, 'i-life-1');
    const agent = start('agent-life-1', 'i-life-1', certs);
    await waitForStatus(ts, 'agent-life-1', 'Ready');
    const listed = await waitFor('metrics in the listing', async () => {
      const a = await agentOf(ts, 'agent-life-1');
      return a !== undefined && a['metrics'] !== undefined ? a : undefined;
    });
    assertAgentShape(listed);
    assert.equal(listed.id, 'agent-life-1');
    assert.equal(await metricValue(ts, 'svc_agents_connected'), 1);
    assert.equal(await metricValue(ts, 'svc_agents_by_status{status="Ready"}'), 1);
    const types = (await eventsOf(ts, 'agent-life-1')).map((e) => e.event_type);
    for (const t of ['agent.connected', 'agent.registered', 'agent.heartbeat', 'agent.status_changed'])
      assert.ok(types.includes(t), `event ${t} emitted (got ${types.join(', ')})`);

    agent.kill('SIGKILL');
    await agent.exited;
    const gone = await waitForStatus(ts, 'agent-life-1', 'Disconnected');
    assert.equal(gone.connected_at, listed.connected_at, 'the listing keeps when it connected');
    const events = await eventsOf(ts, 'agent-life-1');
    const disconnected = events.find((e) => e.event_type === 'agent.disconnected');
    assert.ok(disconnected, 'agent.disconnected emitted');
    assert.ok(
      events.some(
        (e) => e.event_type === 'agent.status_changed' && e.details['to'] === 'Disconnected' && e.details['cause'] === 'stream_ended',
      ),
    );
    assert.equal(await metricValue(ts, 'svc_agents_connected'), 0);
    assert.equal(await metricValue(ts, 'svc_agents_by_status{status="Disconnected"}'), 1);

    // Restarted: Ready again, same listing entry, a new connection time.
    start('agent-life-1', 'i-life-1', certs);
    const back = await waitForStatus(ts, 'agent-life-1', 'Ready');
    assert.ok(back.connected_at > listed.connected_at);
    assert.equal(
      (await ts.getJson<{ agents: unknown[] }>('/api/v1/agents')).body.agents.filter((a) => (a as { id: string }).id === 'agent-life-1')
        .length,
      1,
    );
  });

  void test('an agent that stops heartbeating becomes Stale and Ready again when it resumes', async () => {
    const certs = await agentCerts(ts, 'i-life-2');
    const agent = start('agent-life-2', 'i-life-2', certs);
    await waitForStatus(ts, 'agent-life-2', 'Ready');
    agent.kill('SIGSTOP');
    try {
      const stale = await waitForStatus(ts, 'agent-life-2', 'Stale', 20_000);
      assert.ok(Date.now() - stale.last_heartbeat >= 3000, 'Stale only after 3 s without a heartbeat');
    } finally {
      agent.kill('SIGCONT');
    }
    await waitForStatus(ts, 'agent-life-2', 'Ready', 20_000);
    const moves = (await eventsOf(ts, 'agent-life-2'))
      .filter((e) => e.event_type === 'agent.status_changed')
      .map((e) => `${String(e.details['from'])}->${String(e.details['to'])}:${String(e.details['cause'])}`);
    assert.ok(moves.includes('Ready->Stale:heartbeat_missed'), moves.join(' '));
    assert.ok(moves.includes('Stale->Ready:heartbeat'), moves.join(' '));
  });

  void test('an agent whose heartbeats report a running command is Busy', async () => {
    const certs = await agentCerts(ts, 'i-life-3');
    start('agent-life-3', 'i-life-3', certs);
    await waitForStatus(ts, 'agent-life-3', 'Ready');
    const client = await operatorClient(ts);
    try {
      const run = execCollect(client, { agentId: 'agent-life-3', command: 'sleep', args: ['4'] });
      await waitForStatus(ts, 'agent-life-3', 'Busy', 20_000);
      const done = await run;
      assert.equal(done.final?.exitCode, 0);
      await waitForStatus(ts, 'agent-life-3', 'Ready', 20_000);
    } finally {
      client.close();
    }
  });
});

void describe('agent removal after the retention period', () => {
  let ts: TestServer;
  const procs: AgentProcess[] = [];
  before(async () => {
    ts = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '1', SVC_AGENT_RETENTION_SECONDS: '1' });
  });
  after(async () => {
    await killAll(procs);
    await ts.stop();
  });

  void test('a Disconnected agent leaves the list once its retention ran out, and can come back', async () => {
    const certs = await agentCerts(ts, 'i-ret-1');
    const p = spawnAgent({ server: ts.grpcTarget, certs, agentId: 'agent-ret-1', instanceId: 'i-ret-1', workDir: ts.dir });
    procs.push(p);
    await waitForStatus(ts, 'agent-ret-1', 'Ready');
    p.kill('SIGKILL');
    await waitFor('agent-ret-1 removed', async () => (await agentOf(ts, 'agent-ret-1')) === undefined);
    assert.equal(ts.server.agents.registry.size, 0);
    const again = spawnAgent({ server: ts.grpcTarget, certs, agentId: 'agent-ret-1', instanceId: 'i-ret-1', workDir: ts.dir });
    procs.push(again);
    await waitForStatus(ts, 'agent-ret-1', 'Ready');
  });
});
