/**
 * The dashboard WebSocket (spec 4.18) with real agents: agent_status and metrics for every agent
 * by default, `output` after a subscribe (data base64 = the command's bytes), `*` subscriptions,
 * unsubscribe, join_session answered, bad messages answered with errors, and a client that stops
 * reading closed as a slow consumer (1008) without holding up the others.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestWs } from './streaming-clients.js';
import { startStreamingServer, type StreamingServer } from './streaming-harness.js';

const AGENT = 'agent-ws-1';

function outputBytes(messages: ReadonlyArray<Record<string, unknown>>, commandId: string): string {
  return Buffer.concat(
    messages.filter((m) => m['type'] === 'output' && m['stream_id'] === commandId).map((m) => Buffer.from(String(m['data']), 'base64')),
  ).toString();
}

void describe('dashboard WebSocket', () => {
  let ts: StreamingServer;
  before(async () => {
    ts = await startStreamingServer({ wsSlowCloseBytes: 512 * 1024 });
  });
  after(async () => {
    await ts.stop();
  });

  void test('status and metrics by default, output after subscribe, in the spec shapes', async () => {
    const ws = await TestWs.open(ts.wsUrl);
    const hello = await ws.until('hello', (ms) => ms.find((m) => m['type'] === 'server_hello'));
    assert.deepEqual(hello['channels'], { output: [], status: ['*'] });
    await ts.agent(AGENT);
    const status = await ws.until('agent_status Ready', (ms) =>
      ms.find((m) => m['type'] === 'agent_status' && m['agent_id'] === AGENT && m['status'] === 'Ready'),
    );
    assert.deepEqual(Object.keys(status).sort(), ['agent_id', 'status', 'timestamp', 'type']);
    const metrics = await ws.until('metrics', (ms) => ms.find((m) => m['type'] === 'metrics' && m['agent_id'] === AGENT));
    for (const k of [
      'cpu_percent',
      'memory_used_bytes',
      'memory_total_bytes',
      'disk_used_bytes',
      'disk_total_bytes',
      'load_avg',
      'timestamp',
    ])
      assert.ok(k in metrics, k);
    assert.equal((metrics['load_avg'] as unknown[]).length, 3);

    await ts.run(AGENT, 'c-ws-before', 'echo not subscribed yet');
    await ts.result('c-ws-before');
    ws.send({ type: 'subscribe', agent_id: AGENT, channels: ['output'] });
    await ws.until('subscribed', (ms) => ms.find((m) => m['type'] === 'subscribed'));
    await ts.run(AGENT, 'c-ws', 'echo hello; echo world >&2');
    await ws.until('output', (ms) => (outputBytes(ms, 'c-ws').length === 12 ? true : undefined));
    assert.equal(outputBytes(ws.messages, 'c-ws-before'), '', 'nothing before the subscription');
    const out = ws.messages.filter((m) => m['type'] === 'output' && m['stream_id'] === 'c-ws');
    for (const m of out) {
      assert.equal(m['agent_id'], AGENT);
      assert.ok(['stdout', 'stderr'].includes(String(m['stream_type'])));
      assert.equal(typeof m['timestamp'], 'number');
      assert.match(String(m['cursor']), /^\d+-\d+$/);
    }
    const byStream = (s: string): string =>
      Buffer.concat(out.filter((m) => m['stream_type'] === s).map((m) => Buffer.from(String(m['data']), 'base64'))).toString();
    assert.equal(byStream('stdout'), 'hello\n');
    assert.equal(byStream('stderr'), 'world\n');

    // `*` supersedes the per-agent subscription: nothing twice.
    ws.send({ type: 'subscribe', agent_id: '*' });
    await ws.until('subscribed *', (ms) => ms.find((m) => m['type'] === 'subscribed' && m['agent_id'] === '*'));
    await ts.run(AGENT, 'c-ws-star', 'echo once');
    await ws.until('star output', (ms) => (outputBytes(ms, 'c-ws-star') !== '' ? true : undefined));
    // A negative check: a pause in which a second copy of the output would arrive.
    await sleep(200);
    assert.equal(outputBytes(ws.messages, 'c-ws-star'), 'once\n');
    ws.send({ type: 'unsubscribe', agent_id: '*', channels: ['output'] });
    await ws.until('unsubscribed', (ms) => ms.find((m) => m['type'] === 'unsubscribed'));
    await ts.run(AGENT, 'c-ws-after', 'echo gone');
    await ts.result('c-ws-after');
    // A negative check: a pause in which output after the unsubscribe would arrive.
    await sleep(200);
    assert.equal(outputBytes(ws.messages, 'c-ws-after'), '', 'nothing after unsubscribe');
    ws.close();
  });

  void test('join_session, ping and bad messages are answered', async () => {
    const ws = await TestWs.open(ts.wsUrl);
    ws.send({ type: 'join_session', session_id: 'sess-1', role: 'observer' });
    const joined = await ws.until('join answer', (ms) => ms.find((m) => m['session_id'] === 'sess-1'));
    assert.equal(joined['type'], 'error');
    assert.equal(joined['code'], 'session.not_found');
    ts.fanout.setJoinSessionHandler((req) => ({ type: 'session_joined', session_id: req.sessionId, role: req.role }));
    ws.send({ type: 'join_session', session_id: 'sess-2', role: 'controller' });
    assert.deepEqual(await ws.until('joined', (ms) => ms.find((m) => m['session_id'] === 'sess-2')), {
      type: 'session_joined',
      session_id: 'sess-2',
      role: 'controller',
    });
    ts.fanout.setJoinSessionHandler(undefined);
    ws.send({ type: 'ping' });
    await ws.until('pong', (ms) => ms.find((m) => m['type'] === 'pong'));
    for (const bad of [
      { type: 'subscribe' },
      { type: 'subscribe', agent_id: 'a', channels: ['video'] },
      { type: 'join_session', session_id: 's', role: 'boss' },
      { type: 'dance' },
      [1, 2],
    ]) {
      const before = ws.messages.length;
      ws.send(bad);
      // Every client also receives the status channel (metrics, agent_status) whenever an agent
      // reports: the answer is the first message after the request that is not one of those.
      const reply = await ws.until('error reply', (ms) =>
        ms.slice(before).find((m) => m['type'] !== 'metrics' && m['type'] !== 'agent_status'),
      );
      assert.equal(reply['type'], 'error', JSON.stringify(bad));
      assert.equal(reply['code'], 'request.invalid');
    }
    ws.close();
  });

  void test('a client that stops reading is closed as a slow consumer; another one gets everything', async () => {
    await ts.agent('agent-ws-flood');
    const slow = await TestWs.open(ts.wsUrl);
    const fine = await TestWs.open(ts.wsUrl);
    for (const c of [slow, fine]) {
      c.send({ type: 'subscribe', agent_id: 'agent-ws-flood', channels: ['output'] });
      await c.until('subscribed', (ms) => ms.find((m) => m['type'] === 'subscribed'));
    }
    slow.ws.pause();
    await ts.run('agent-ws-flood', 'c-ws-flood', 'seq 1 600000');
    await ts.result('c-ws-flood');
    let expected = '';
    for (let i = 1; i <= 600000; i++) expected += `${i}\n`;
    await fine.until('all output', (ms) => (outputBytes(ms, 'c-ws-flood').length === expected.length ? true : undefined), 60_000);
    assert.equal(outputBytes(fine.messages, 'c-ws-flood'), expected);
    slow.ws.resume();
    const closed = await slow.closed;
    assert.ok(closed.code === 1008 || closed.code === 1006, `closed (${closed.code} ${closed.reason})`);
    if (closed.code === 1008) assert.match(closed.reason, /^slow_consumer/);
    assert.ok(outputBytes(slow.messages, 'c-ws-flood').length < expected.length, 'the slow one did not get everything');
    assert.match(await ts.metricsText(), /svc_output_slow_subscribers_total\{transport="ws"\} [1-9]/);
    fine.close();
  });
});
