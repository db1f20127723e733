/**
 * The dashboard WebSocket hub without sockets: fake connections and a publisher that routes like
 * uWS topics. Subscriptions (per agent, `*` superseding, unsubscribe, limits), nothing delivered
 * twice, status and metrics messages from registry changes, join_session with and without the
 * sessions hook, error replies, and the slow-consumer close.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { AgentSnapshot } from '../../../actors/protocol/agent-frames.js';
import type { WsConn, WsSendStatus } from '../../../src/http/ws-server.js';
import { kMaxAgentSubscriptions, WsHub, wsTopic, type WsPublisher } from '../../../src/streaming/ws-hub.js';
import { LOCAL_PEER } from '../../../src/http/types.js';

let nextId = 1;

class FakeConn implements WsConn {
  ping(): void {}
  onPong(): void {}
  readonly id = nextId++;
  readonly request = {
    method: 'GET',
    path: '/',
    query: new URLSearchParams(),
    headers: {},
    params: {},
    body: undefined,
    rawBody: null,
    remoteAddress: '127.0.0.1',
    peer: LOCAL_PEER,
  };
  readonly protocol = '';
  readonly topics = new Set<string>();
  readonly got: Array<Record<string, unknown>> = [];
  closed = false;
  closedWith: { code: number; reason: string } | undefined;
  buffered = 0;
  send(data: Uint8Array | string): WsSendStatus {
    this.got.push(JSON.parse(typeof data === 'string' ? data : Buffer.from(data).toString()) as Record<string, unknown>);
    return 'sent';
  }
  subscribe(topic: string): void {
    this.topics.add(topic);
  }
  unsubscribe(topic: string): void {
    this.topics.delete(topic);
  }
  close(code = 1000, reason = ''): void {
    this.closed = true;
    this.closedWith = { code, reason };
  }
  bufferedAmount(): number {
    return this.buffered;
  }
  onDrain(): void {}
  onClose(): void {}
}

class FakePublisher implements WsPublisher {
  readonly conns = new Set<FakeConn>();
  published = 0;
  publish(topic: string, bytes: Uint8Array | string): void {
    this.published++;
    for (const c of this.conns) if (c.topics.has(topic)) c.send(bytes);
  }
  subscriberCount(topic: string): number {
    return [...this.conns].filter((c) => c.topics.has(topic)).length;
  }
}

function rig(opts: { slowCloseBytes?: number } = {}): {
  hub: WsHub;
  pub: FakePublisher;
  open(): FakeConn;
  say(c: FakeConn, m: unknown): void;
  slow: number[];
} {
  const slow: number[] = [];
  const hub = new WsHub({ logger: pino({ level: 'silent' }), onSlow: () => slow.push(1), ...opts });
  const pub = new FakePublisher();
  hub.attach(pub);
  return {
    hub,
    pub,
    slow,
    open() {
      const c = new FakeConn();
      pub.conns.add(c);
      hub.handlers.open?.(c);
      return c;
    },
    say(c, m) {
      const bytes = Buffer.from(typeof m === 'string' ? m : JSON.stringify(m));
      hub.handlers.message?.(c, bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength), false);
    },
  };
}

const out = (agentId: string, n: number): Uint8Array => Buffer.from(JSON.stringify({ type: 'output', agent_id: agentId, seq: n }));
const seqs = (c: FakeConn, agentId?: string): unknown[] =>
  c.got.filter((m) => m['type'] === 'output' && (agentId === undefined || m['agent_id'] === agentId)).map((m) => m['seq']);

function snapshot(id: string, status: string, cpu = 1): AgentSnapshot {
  return {
    id,
    hostname: 'h',
    ip_address: '10.0.0.1',
    status,
    connected_at: 1,
    last_heartbeat: 2,
    instance_id: 'i',
    profile: 'basic',
    labels: {},
    agent_version: '1',
    running_commands: 0,
    disconnected_at: null,
    metrics: {
      cpu_percent: cpu,
      memory_used_bytes: 1,
      memory_total_bytes: 2,
      disk_used_bytes: 3,
      disk_total_bytes: 4,
      load_avg: [0.1, 0.2, 0.3],
      uptime_seconds: 5,
    },
  };
}

void describe('WsHub', () => {
  void test('hello, then output only after subscribe; * supersedes per-agent subscriptions; unsubscribe', () => {
    const r = rig();
    const c = r.open();
    assert.equal(c.got[0]!['type'], 'server_hello');
    r.hub.publishOutput('a1', out('a1', 1));
    assert.deepEqual(seqs(c), []);
    r.say(c, { type: 'subscribe', agent_id: 'a1', channels: ['output'] });
    assert.deepEqual(c.got.at(-1), { type: 'subscribed', agent_id: 'a1', channels: ['output'] });
    r.hub.publishOutput('a1', out('a1', 2));
    r.hub.publishOutput('a2', out('a2', 2));
    assert.deepEqual(seqs(c), [2]);
    r.say(c, { type: 'subscribe', agent_id: '*', channels: ['output'] });
    assert.ok(!c.topics.has(wsTopic('output', 'a1')), 'per-agent topic dropped under *');
    r.hub.publishOutput('a1', out('a1', 3));
    r.hub.publishOutput('a2', out('a2', 3));
    assert.deepEqual(seqs(c, 'a1'), [2, 3], 'nothing twice');
    assert.deepEqual(seqs(c, 'a2'), [3]);
    r.say(c, { type: 'unsubscribe', agent_id: '*', channels: ['output'] });
    const before = r.pub.published;
    r.hub.publishOutput('a1', out('a1', 4));
    assert.equal(r.pub.published, before, 'nobody listens: nothing is published');
  });

  void test('status and metrics of every agent by default, each change once', () => {
    const r = rig();
    const c = r.open();
    r.hub.onAgentChange({ kind: 'updated', agent: snapshot('a1', 'Starting'), previousStatus: null });
    r.hub.onAgentChange({ kind: 'updated', agent: snapshot('a1', 'Ready'), previousStatus: 'Starting' });
    r.hub.onAgentChange({ kind: 'updated', agent: snapshot('a1', 'Ready'), previousStatus: 'Ready' });
    r.hub.onAgentChange({ kind: 'updated', agent: snapshot('a1', 'Ready', 7), previousStatus: 'Ready' });
    const status = c.got.filter((m) => m['type'] === 'agent_status').map((m) => m['status']);
    assert.deepEqual(status, ['Starting', 'Ready']);
    const metrics = c.got.filter((m) => m['type'] === 'metrics');
    assert.deepEqual(
      metrics.map((m) => m['cpu_percent']),
      [1, 7],
      'metrics only when they change',
    );
    assert.deepEqual(Object.keys(metrics[0]!).sort(), [
      'agent_id',
      'cpu_percent',
      'disk_total_bytes',
      'disk_used_bytes',
      'load_avg',
      'memory_total_bytes',
      'memory_used_bytes',
      'timestamp',
      'type',
    ]);
    r.say(c, { type: 'unsubscribe', agent_id: '*', channels: ['status'] });
    r.hub.onAgentChange({ kind: 'updated', agent: snapshot('a1', 'Busy'), previousStatus: 'Ready' });
    assert.equal(c.got.filter((m) => m['type'] === 'agent_status').length, 2);
  });

  void test('join_session: an error until the sessions hook is installed, then its reply', async () => {
    const r = rig();
    const c = r.open();
    r.say(c, { type: 'join_session', session_id: 's1', role: 'observer' });
    assert.equal(c.got.at(-1)!['code'], 'session.not_found');
    r.hub.setJoinSessionHandler((req) => ({
      type: 'session_joined',
      session_id: req.sessionId,
      role: req.role === 'controller' ? 'observer' : req.role,
    }));
    r.say(c, { type: 'join_session', session_id: 's1', role: 'controller' });
    await new Promise((res) => setImmediate(res));
    assert.deepEqual(c.got.at(-1), { type: 'session_joined', session_id: 's1', role: 'observer' });
  });

  void test('bad messages get request.invalid errors; the subscription limit holds', () => {
    const r = rig();
    const c = r.open();
    for (const bad of [
      'not json',
      '[1]',
      '{"type":3}',
      { type: 'subscribe', agent_id: '' },
      { type: 'subscribe', agent_id: 'a', channels: [] },
      { type: 'join_session', session_id: 's' },
      { type: 'what' },
    ]) {
      r.say(c, bad);
      assert.equal(c.got.at(-1)!['code'], 'request.invalid', JSON.stringify(bad));
    }
    r.hub.handlers.message?.(c, new ArrayBuffer(2), true);
    assert.equal(c.got.at(-1)!['code'], 'request.invalid');
    for (let i = 0; i < kMaxAgentSubscriptions; i++) r.say(c, { type: 'subscribe', agent_id: `a${i}`, channels: ['output'] });
    r.say(c, { type: 'subscribe', agent_id: 'one-more', channels: ['output'] });
    assert.equal(c.got.at(-1)!['code'], 'request.invalid');
    r.say(c, { type: 'ping' });
    assert.equal(c.got.at(-1)!['type'], 'pong');
  });

  void test('a connection with more than slowCloseBytes queued is closed 1008 slow_consumer after a publish', () => {
    const r = rig({ slowCloseBytes: 1000 });
    const slow = r.open();
    const fine = r.open();
    for (const c of [slow, fine]) r.say(c, { type: 'subscribe', agent_id: 'a1' });
    slow.buffered = 5000;
    r.hub.publishOutput('a1', out('a1', 1));
    assert.equal(slow.closedWith?.code, 1008);
    assert.match(slow.closedWith?.reason ?? '', /^slow_consumer/);
    assert.equal(fine.closed, false);
    assert.deepEqual(r.slow, [1]);
    assert.equal(r.hub.connectionCount, 1);
    r.hub.stop();
  });
});
