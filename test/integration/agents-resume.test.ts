/**
 * Output produced while the server is unreachable reaches it once, in order, when the agent is
 * back: (1) the network between agent and server is cut (a TCP relay drops every connection and
 * refuses new ones) while an Exec streams; (2) the server itself stops and starts again on the
 * same address while the agent's command keeps writing.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import {
  agentCerts,
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
import { Relay } from '../support/tcp-relay.js';
import { DEADLINE_MS, settled } from '../support/wait.js';
import { chunksOf, SseClient } from './streaming-clients.js';

const LINES = 60;
/** Prints line-1 … line-N, one every 100 ms. */
const COUNTER = ['-c', `i=0; while [ $i -lt ${LINES} ]; do i=$((i+1)); echo line-$i; sleep 0.1; done`];
const EXPECTED = Array.from({ length: LINES }, (_, i) => `line-${i + 1}\n`).join('');

void describe('output while the network is cut', () => {
  let ts: TestServer;
  let relay: Relay;
  const procs: AgentProcess[] = [];
  before(async () => {
    ts = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '1' });
    relay = new Relay({ host: '127.0.0.1', port: ts.server.ports.grpc });
    await relay.listen();
  });
  after(async () => {
    await killAll(procs);
    await relay.close();
    await ts.stop();
  });

  void test('an Exec keeps streaming across a cut: every line once, in order', async () => {
    const certs = await agentCerts(ts, 'i-cut-1');
    procs.push(spawnAgent({ server: `127.0.0.1:${relay.port}`, certs, agentId: 'agent-cut-1', instanceId: 'i-cut-1', workDir: ts.dir }));
    await waitForStatus(ts, 'agent-cut-1', 'Ready');
    const client = await operatorClient(ts);
    const seen: string[] = [];
    const unsubscribe = ts.server.agents.subscribeCommands((e) => {
      if (e.kind === 'output') seen.push(e.data.toString());
    });
    try {
      const run = execCollect(client, { agentId: 'agent-cut-1', command: 'sh', args: COUNTER });
      await waitFor(
        'some output before the cut (line-10)',
        () => seen.join('').includes('line-10\n'),
        DEADLINE_MS.process,
        100,
        () => `received ${JSON.stringify(seen.join('').slice(-200))}`,
      );
      relay.cut();
      await waitForStatus(ts, 'agent-cut-1', 'Disconnected');
      // The outage itself: for 2 s the command keeps writing (about 20 lines) into the agent's buffer.
      await new Promise((r) => setTimeout(r, 2000));
      relay.restore();
      await waitForStatus(ts, 'agent-cut-1', 'Ready', 30_000);
      const done = await run;
      assert.equal(done.status.code, 0, done.status.details);
      assert.equal(done.stdout.toString(), EXPECTED);
      assert.equal(done.final?.complete, true);
      assert.equal(done.final?.exitCode, 0);
      assert.ok(!done.items.some((i) => i.error !== '' && !i.complete), 'no gap reported');
      const registrations = (await eventsOf(ts, 'agent-cut-1')).filter((e) => e.event_type === 'agent.registered');
      assert.equal(registrations.length, 2, 'registered again after the cut');
      assert.equal(registrations[1]?.details['resume_cursors'], 1, 'the agent resumed the running command');
    } finally {
      unsubscribe();
      client.close();
    }
  });
});

void describe('output while the server is down', () => {
  let first: TestServer;
  let second: TestServer | undefined;
  const procs: AgentProcess[] = [];
  before(async () => {
    first = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '1' });
  });
  after(async () => {
    await killAll(procs);
    await second?.stop();
    await first.server.stop();
    await rm(first.dir, { recursive: true, force: true });
  });

  void test('a restarted server receives the whole output of a command that kept running, once, in order', async () => {
    const certs = await agentCerts(first, 'i-restart-1');
    procs.push(spawnAgent({ server: first.grpcTarget, certs, agentId: 'agent-restart-1', instanceId: 'i-restart-1', workDir: first.dir }));
    await waitForStatus(first, 'agent-restart-1', 'Ready');
    const client = await operatorClient(first);
    const seen: string[] = [];
    /** stdout chunks the first server received, by seq. */
    const beforeStop = new Map<number, Buffer>();
    let commandId = '';
    const unsubscribeFirst = first.server.agents.subscribeCommands((e) => {
      if (e.kind !== 'output') return;
      commandId = e.commandId;
      seen.push(e.data.toString());
      if (e.stream === 'stdout') beforeStop.set(e.seq, e.data);
    });
    const run = execCollect(client, { agentId: 'agent-restart-1', command: 'sh', args: COUNTER });
    await waitFor('output before the restart', () => seen.join('').includes('line-5\n'));
    const grpcPort = first.server.ports.grpc;
    await first.server.stop();
    unsubscribeFirst();
    const interrupted = await run;
    client.close();
    assert.notEqual(interrupted.status.code, 0, 'the Exec call ends with the server');
    // The outage itself: for 1.5 s no server runs while the command keeps writing.
    await new Promise((r) => setTimeout(r, 1500));

    second = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '1', SVC_GRPC_ADDR: `127.0.0.1:${grpcPort}` }, first.dir);
    await waitForStatus(second, 'agent-restart-1', 'Ready', 30_000);
    // What the new server holds, read as a user reads it: the command's replay, which ends with
    // stream_end once the result is in. (A listener attached after start-up could miss the resent
    // chunks: the agent reconnects as soon as the gRPC port listens.)
    const replay = await SseClient.open(
      `http://127.0.0.1:${second.server.ports.http}/api/v1/agent-output/stream?agent_id=agent-restart-1&command_id=${commandId}&replay=true&limit=1000`,
    );
    await settled('the command to finish on the new server', replay.ended, {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => JSON.stringify(replay.events.at(-1) ?? null),
    });
    const end = JSON.parse(replay.named('agent_output.error').at(-1)?.data ?? '{}') as { code?: string; exit_code?: number };
    assert.deepEqual([end.code, end.exit_code], ['stream_end', 0]);
    // Event ids are <clock>-<seq> (the command's seq).
    const outputs = chunksOf(replay.events)
      .filter((c) => c['stream'] === 'stdout')
      .map((c) => ({ seq: Number(c.id.split('-')[1]), data: Buffer.from(String(c['data_base64']), 'base64') }));
    const seqs = outputs.map((o) => o.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      'in seq order',
    );
    assert.equal(new Set(seqs).size, seqs.length, 'each seq once');
    assert.ok(!replay.named('agent_output.error').some((e) => e.data.includes('output_gap')), 'nothing lost');
    const firstResent = seqs[0] ?? Infinity;
    assert.ok(
      firstResent <= Math.max(0, ...beforeStop.keys()) + 1,
      `the resent tail starts where the first server's output ended (first resent seq ${firstResent})`,
    );
    const whole = new Map(beforeStop);
    for (const o of outputs) whole.set(o.seq, o.data);
    const ordered = [...whole.entries()].sort((a, b) => a[0] - b[0]);
    assert.deepEqual(
      ordered.map(([seq]) => seq),
      ordered.map((_, i) => i + 1),
      'no seq missing between the two servers',
    );
    assert.equal(Buffer.concat(ordered.map(([, d]) => d)).toString(), EXPECTED);
  });
});
