/**
 * AgentService's routing of actor frames on the main thread (no listener, no actors): snapshots
 * to the registry, events to the store, metric frames to prom-client, command output to
 * subscribers; malformed frames are logged and dropped; a crashed shard's agents become
 * Disconnected and are removed after the retention period.
 */
import assert from 'node:assert/strict';
import { commandKey } from '../../../actors/protocol/publish-frames.js';
import { describe, test } from 'node:test';
import { Writable } from 'node:stream';
import { AgentFrameKind, encodeJson, encodeOutputFrame, type AgentSnapshot } from '../../../actors/protocol/agent-frames.js';
import { AgentService, type CommandEvent } from '../../../src/agent-link/agent-service.js';
import { parseListenAddress } from '../../../src/config/parsers.js';
import { EventStore } from '../../../src/events/event-store.js';
import { countErrorLines, createLogger } from '../../../src/observability/log.js';
import { createMetrics } from '../../../src/observability/metrics.js';

function service(retentionSeconds = 600): { svc: AgentService; events: EventStore; metrics: ReturnType<typeof createMetrics> } {
  const metrics = createMetrics({ defaultMetrics: false });
  const events = new EventStore();
  // the server's logger, writing nowhere, with its error lines counted as main.ts counts them
  const { logger } = createLogger(
    { format: 'json', level: 'info', file: null, rotation: 'none', retentionDays: 7 },
    { destination: new Writable({ write: (_c, _e, cb) => cb() }) },
  );
  countErrorLines(logger, metrics.errorsLoggedTotal);
  const svc = new AgentService({
    config: {
      trustDomain: 'sandbox.local',
      secretsDir: '/nonexistent',
      grpcAddr: parseListenAddress('127.0.0.1:0'),
      agentHeartbeatSeconds: 30,
      agentStaleAfterSeconds: 90,
      agentRetentionSeconds: retentionSeconds,
      execDefaultTimeoutSeconds: 300,
      shutdownDeadlineMs: 1000,
    },
    logger,
    metrics,
    events,
  });
  return { svc, events, metrics };
}

const snap = (id: string, status: string): AgentSnapshot => ({
  id,
  hostname: 'h',
  ip_address: 'ip',
  status,
  connected_at: 1,
  last_heartbeat: 2,
  instance_id: `i-${id}`,
  profile: '',
  labels: {},
  agent_version: '',
  running_commands: 0,
  disconnected_at: null,
});

async function value(metrics: ReturnType<typeof createMetrics>, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = await metrics.registry.getSingleMetric(name)!.get();
  return m.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? Number.NaN;
}

void describe('AgentService frame routing', () => {
  void test('snapshots, events and metric frames land in the registry, the store and /metrics', async () => {
    const { svc, events, metrics } = service();
    assert.equal(svc.onEmit(AgentFrameKind.kFrameAgentSnapshot, 'a', encodeJson(snap('a', 'Ready'))), true);
    assert.equal(svc.registry.get('a')?.status, 'Ready');
    svc.onEmit(
      AgentFrameKind.kFrameAgentEvent,
      'a',
      encodeJson({
        event_type: 'agent.registered',
        agent_id: 'a',
        vm_name: '',
        timestamp: new Date(0).toISOString(),
        details: { x: 1 },
        trace_id: null,
      }),
    );
    assert.equal(events.query({ limit: 10 }).events[0]?.event_type, 'agent.registered');
    svc.onEmit(AgentFrameKind.kFrameAgentMetric, 'a', encodeJson({ type: 'command_started' }));
    svc.onEmit(AgentFrameKind.kFrameAgentMetric, 'a', encodeJson({ type: 'command_finished', result: 'killed', latency_seconds: 0.25 }));
    svc.onEmit(AgentFrameKind.kFrameAgentMetric, 'a', encodeJson({ type: 'message_rejected', reason: 'undecodable' }));
    assert.equal(await value(metrics, 'svc_commands_total'), 1);
    assert.equal(await value(metrics, 'svc_commands_by_result', { result: 'killed' }), 1);
    assert.equal(await value(metrics, 'svc_agent_messages_rejected_total', { reason: 'undecodable' }), 1);
    assert.equal(svc.stats().latency.count, 1);
    assert.ok(Math.abs(svc.stats().latency.p50Ms - 250) < 1);
    assert.equal(svc.connectedCount(), 1);
  });

  void test('a malformed frame is logged and dropped; other kinds are not ours', async () => {
    const { svc, metrics } = service();
    assert.equal(svc.onEmit(AgentFrameKind.kFrameAgentSnapshot, 'a', new TextEncoder().encode('{not json')), true);
    assert.equal(await value(metrics, 'svc_errors_logged_total', { component: 'agents' }), 1);
    assert.equal(svc.onEmit(200, 'x', new Uint8Array()), false);
    assert.equal(svc.registry.size, 0);
  });

  void test('command output, gaps and results reach subscribers', () => {
    const { svc } = service();
    const seen: CommandEvent[] = [];
    const off = svc.subscribeCommands((e) => seen.push(e));
    const chunks: string[] = [];
    const offChunks = svc.subscribeOutput((agentId, commandId, f) => chunks.push(`${agentId}/${commandId}/${f.seq}/${f.clock}`));
    svc.onEmit(
      AgentFrameKind.kFrameCommandOutput,
      commandKey('a', 'c-1'),
      encodeOutputFrame({ stream: 2, eof: false, seq: 1, offset: 0, timestampMs: 5, clock: 77 }, Buffer.from('hi')),
    );
    svc.onEmit(
      AgentFrameKind.kFrameCommandGap,
      'c-1',
      encodeJson({ agent_id: 'a', command_id: 'c-1', first_seq: 2, last_seq: 3, lost_bytes: 9, reason: 'r' }),
    );
    off();
    offChunks();
    svc.onEmit(
      AgentFrameKind.kFrameCommandOutput,
      commandKey('a', 'c-1'),
      encodeOutputFrame({ stream: 1, eof: false, seq: 4, offset: 0, timestampMs: 5 }, Buffer.from('no')),
    );
    assert.equal(seen.length, 2);
    assert.deepEqual(chunks, ['a/c-1/1/77'], 'the fanout reads the same one frame');
    assert.deepEqual(seen[0]?.kind === 'output' && [seen[0].stream, seen[0].data.toString(), seen[0].seq], ['stderr', 'hi', 1]);
    assert.equal(seen[1]?.kind, 'gap');
  });

  void test('a crashed shard: its agents become Disconnected (with the event) and are removed after the retention period', async () => {
    const { svc, events } = service(0);
    svc.onEmit(AgentFrameKind.kFrameAgentSnapshot, 'a', encodeJson(snap('a', 'Busy')));
    svc.onEmit(AgentFrameKind.kFrameAgentSnapshot, 'b', encodeJson(snap('b', 'Ready')));
    svc.onShardRestart(1, ['agent:a', 'vm:something', 'agent:a/cmd/c-1']);
    assert.equal(svc.registry.get('a')?.status, 'Disconnected');
    assert.equal(svc.registry.get('b')?.status, 'Ready');
    const ev = events.query({ limit: 10, eventType: 'agent.disconnected' }).events;
    assert.equal(ev.length, 1);
    assert.match(String(ev[0]?.details['reason']), /shard 1 restarted/);
    // Waits out the retention period (0 s): timers fire in expiry order, so the removal timer armed before this pause has run when it ends, however busy the machine.
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(svc.registry.get('a'), undefined);
    assert.ok(svc.registry.get('b') !== undefined);
    await svc.stop();
  });
});
