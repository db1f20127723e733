/**
 * Exec (spec 4.17, issue 3 item 5) against real agents: output then one final complete item;
 * unknown agent NOT_FOUND; timeout_seconds honoured by the agent; an agent gone silent past the
 * timeout and grace ends the call DEADLINE_EXCEEDED; cancelling the call kills the command; the
 * command metrics and events follow.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { AgentServiceMethods, v1 } from '../../proto/index.js';
import { DEADLINE_MS } from '../support/wait.js';
import {
  agentCerts,
  agentCommands,
  eventsOf,
  execCollect,
  killAll,
  killProcessGroups,
  operatorClient,
  spawnAgent,
  startTestServer,
  waitFor,
  waitForStatus,
  type AgentProcess,
  type TestServer,
} from './agents-harness.js';

async function metricsText(ts: TestServer): Promise<string> {
  return (await fetch(`http://127.0.0.1:${ts.server.ports.http}/metrics`)).text();
}

function metric(text: string, line: string): number {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? Number.NaN : Number(found.slice(line.length + 1));
}

void describe('Exec', () => {
  let ts: TestServer;
  let client: grpc.Client;
  const procs: AgentProcess[] = [];
  before(async () => {
    ts = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '1' });
    client = await operatorClient(ts);
    const certs = await agentCerts(ts, 'i-exec-1');
    procs.push(spawnAgent({ server: ts.grpcTarget, certs, agentId: 'agent-exec-1', instanceId: 'i-exec-1', workDir: ts.dir }));
    await waitForStatus(ts, 'agent-exec-1', 'Ready');
  });
  after(async () => {
    client.close();
    await killAll(procs);
    await ts.stop();
  });

  void test('streams stdout and stderr, then one complete item with the exit code; metrics and events follow', async () => {
    const before = await metricsText(ts);
    const out = await execCollect(client, {
      agentId: 'agent-exec-1',
      command: 'sh',
      args: ['-c', 'printf "%s" "$GREETING"; echo " from $(pwd)"; echo oops >&2'],
      env: { GREETING: 'hello' },
      workingDir: '/tmp',
    });
    assert.equal(out.status.code, grpc.status.OK, out.status.details);
    assert.equal(out.stdout.toString(), 'hello from /tmp\n');
    assert.equal(out.stderr.toString(), 'oops\n');
    assert.equal(out.items.filter((i) => i.complete).length, 1);
    assert.equal(out.items.at(-1)?.complete, true);
    assert.equal(out.final?.exitCode, 0);
    const afterText = await waitFor('the latency histogram', async () => {
      const t = await metricsText(ts);
      return metric(t, 'svc_command_latency_seconds_count') > metric(before, 'svc_command_latency_seconds_count') ? t : undefined;
    });
    assert.equal(metric(afterText, 'svc_commands_total') - metric(before, 'svc_commands_total'), 1);
    assert.equal(
      metric(afterText, 'svc_commands_by_result{result="success"}') - metric(before, 'svc_commands_by_result{result="success"}'),
      1,
    );
    const events = await eventsOf(ts, 'agent-exec-1');
    const started = events.find((e) => e.event_type === 'agent.command.started');
    const completed = events.find(
      (e) => e.event_type === 'agent.command.completed' && e.details['command_id'] === started?.details['command_id'],
    );
    assert.ok(started && completed, 'agent.command.started and agent.command.completed emitted');
    assert.equal(completed.details['exit_code'], 0);
  });

  void test('a failing command reports its exit code and counts as failure', async () => {
    const before = await metricsText(ts);
    const out = await execCollect(client, { agentId: 'agent-exec-1', command: 'sh', args: ['-c', 'exit 7'] });
    assert.equal(out.final?.exitCode, 7);
    await waitFor(
      'failure counted',
      async () =>
        metric(await metricsText(ts), 'svc_commands_by_result{result="failure"}') ===
        metric(before, 'svc_commands_by_result{result="failure"}') + 1,
    );
  });

  void test('a command that cannot start ends with exit code -1 and an error', async () => {
    const out = await execCollect(client, { agentId: 'agent-exec-1', command: '/nonexistent/program' });
    assert.equal(out.status.code, grpc.status.OK);
    assert.equal(out.final?.exitCode, -1);
    assert.notEqual(out.final?.error, '');
  });

  void test('an unknown agent is NOT_FOUND', async () => {
    const out = await execCollect(client, { agentId: 'agent-nobody', command: 'true' });
    assert.equal(out.status.code, grpc.status.NOT_FOUND);
  });

  void test('timeout_seconds is honoured: the agent kills the process group and the final item says so', async () => {
    const startedMs = Date.now();
    const out = await execCollect(client, {
      agentId: 'agent-exec-1',
      command: 'sh',
      args: ['-c', 'echo begin; sleep 30; echo never'],
      timeoutSeconds: 1,
    });
    assert.ok(Date.now() - startedMs < 20_000, 'ended long before the sleep would have');
    assert.equal(out.status.code, grpc.status.OK, out.status.details);
    assert.equal(out.stdout.toString(), 'begin\n');
    assert.equal(out.final?.complete, true);
    assert.ok((out.final?.exitCode ?? 0) > 128, `killed by a signal (exit ${out.final?.exitCode})`);
    assert.match(out.final?.error ?? '', /timed out/);
    await waitFor('timeout counted', async () => metric(await metricsText(ts), 'svc_commands_by_result{result="timeout"}') >= 1);
  });

  void test('cancelling the call kills the command', async () => {
    const call = client.makeServerStreamRequest<v1.IExecRequest, v1.ExecOutput>(
      AgentServiceMethods.Exec.path,
      (m) => Buffer.from(v1.ExecRequest.encode(m).finish()),
      (b) => v1.ExecOutput.decode(b),
      { agentId: 'agent-exec-1', command: 'sh', args: ['-c', 'echo started; exec sleep 60'] },
    );
    call.on('error', () => undefined);
    await new Promise<void>((resolve) => call.once('data', () => resolve()));
    call.cancel();
    const completed = await waitFor(
      'the command to end after the cancel',
      async () => {
        const events = await eventsOf(ts, 'agent-exec-1');
        return events.find((e) => e.event_type === 'agent.command.completed' && e.details['exit_code'] === 137);
      },
      20_000,
    );
    assert.equal(completed.details['result'], 'killed');
  });
});

void describe('Exec on an agent that goes silent', () => {
  let ts: TestServer;
  let client: grpc.Client;
  const procs: AgentProcess[] = [];
  before(async () => {
    ts = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '1' });
    client = await operatorClient(ts);
  });
  after(async () => {
    client.close();
    await killAll(procs);
    await ts.stop();
  });

  void test('no result within timeout + grace ends the call DEADLINE_EXCEEDED; a Disconnected agent is UNAVAILABLE', async () => {
    const certs = await agentCerts(ts, 'i-silent');
    const agent = spawnAgent({ server: ts.grpcTarget, certs, agentId: 'agent-silent', instanceId: 'i-silent', workDir: ts.dir });
    procs.push(agent);
    await waitForStatus(ts, 'agent-silent', 'Ready');
    const run = execCollect(client, { agentId: 'agent-silent', command: 'sleep', args: ['60'], timeoutSeconds: 1 });
    // Wait for the sleep itself, not for agent.command.started: the server records that event
    // when it SENDS the command, so the agent could be stopped before or after it spawned the
    // sleep, and in the second case the SIGKILL below left `sleep 60` running after the test.
    const sleep = await waitFor(
      'the agent to run sleep 60',
      () => agentCommands(agent).find((c) => c.cmdline === 'sleep 60'),
      DEADLINE_MS.process,
      10,
    );
    agent.kill('SIGSTOP');
    const out = await run;
    assert.equal(out.status.code, grpc.status.DEADLINE_EXCEEDED, out.status.details);
    assert.equal(out.final, undefined);
    agent.kill('SIGKILL');
    // The sleep leads its own process group and a SIGKILLed agent cannot end it: end it here.
    await killProcessGroups([sleep.pid]);
    await waitForStatus(ts, 'agent-silent', 'Disconnected');
    const gone = await execCollect(client, { agentId: 'agent-silent', command: 'true' });
    assert.equal(gone.status.code, grpc.status.UNAVAILABLE);
  });
});
