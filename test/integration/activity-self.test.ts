/**
 * What sandboxd records about itself (issue 19 part 6), on the whole server (src/main.ts's
 * components, the SQLite activity store in the state dir): a command run on a real agent (a
 * sandbox-agent process over mTLS gRPC, instance id apart from its agent id) shows up in
 * GET /api/v2/activity/events?command_id=… as command.started and command.finished with its exit
 * code and argv0 only; a session opened and killed (on a second agent with a tmux server of its own)
 * shows session.opened and session.closed; a task
 * running the fake coding agent (its VM on libvirt's test:///default) shows each tool call started
 * and finished with the tool's name and the stream's tool_use id; a v1 event a client posts is not
 * recorded as observed; and after a restart of sandboxd on the same state dir the sequences go on
 * without a conflict, a jump or a gap.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { AgentCommandClient } from '../../src/agent-link/command-client.js';
import { ensureCa, writeAgentBundle } from '../../src/identity/ca.js';
import { initGitRepo } from '../support/git-repo.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import type { ActivityCollectorCoverage, ActivityEvent, ActivityEventPage } from '../../src/wire/activity.js';
import { serverPort } from '../support/ports.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { killAll, spawnAgent, type AgentProcess } from './agents-harness.js';
import { spawnSessionAgent, type AgentProc } from './sessions-harness.js';
import { FAKE_COMMAND } from './tasks-harness.js';

const TENANT = 'tenant-self';
const HOST = 'host-self';
const AGENT = 'agent-activity-1';
const INSTANCE = 'i-activity-1';
/** The agent sessions run on: its own tmux server (sessions-harness), ended with the test. */
const SESSION_AGENT = 'agent-activity-sessions';
const READ_HEADERS = { 'x-svc-tenant-id': TENANT, 'x-svc-host-id': '*', 'x-svc-instance-id': '*', 'x-svc-agent-id': '*' };

describe('activity sandboxd records about itself', { timeout: 600_000 }, () => {
  let dir = '';
  let grpcPort = 0;
  let server: ServerHandle | null = null;
  let base = '';
  const procs: AgentProcess[] = [];
  let sessionAgent: AgentProc | null = null;

  const start = async (): Promise<ServerHandle> => {
    const config = loopbackConfig(dir, {
      SVC_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
      SVC_ACTOR_SHARDS: '1',
      SVC_TENANT_ID: TENANT,
      SVC_HOST_ID: HOST,
      SVC_SHUTDOWN_DEADLINE_MS: '20000',
    });
    const s = await startServer(config, pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' }));
    base = `http://127.0.0.1:${s.ports.http}`;
    return s;
  };
  const events = async (query: string): Promise<ActivityEventPage> => {
    const res = await fetch(`${base}/api/v2/activity/events?${query}`, { headers: READ_HEADERS });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return JSON.parse(text) as ActivityEventPage;
  };
  /** Polls the events of `query` until `count` are there (the collector flushes every 250 ms). */
  const eventsUntil = (what: string, query: string, count: number): Promise<ActivityEvent[]> => {
    let last: ActivityEvent[] = [];
    return waitFor(
      what,
      async () => {
        last = (await events(`${query}&limit=1000`)).events;
        return last.length >= count ? last : undefined;
      },
      {
        deadlineMs: DEADLINE_MS.process,
        intervalMs: 100,
        lastState: () => `events ${JSON.stringify(last.map((e) => [e.event_name, e.integrity.collector_sequence]))}`,
      },
    );
  };
  const selfCoverage = async (): Promise<ActivityCollectorCoverage | undefined> => {
    const res = await fetch(`${base}/api/v2/activity/coverage?collector_id=sandboxd`, { headers: READ_HEADERS });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { coverage: ActivityCollectorCoverage[] };
    return body.coverage.find((c) => c.agent_id === AGENT);
  };
  const agentReady = async (s: ServerHandle): Promise<void> => {
    await waitFor(`agent ${AGENT} Ready`, () => s.agents.registry.get(AGENT)?.status === 'Ready', {
      deadlineMs: DEADLINE_MS.agent,
      intervalMs: 100,
      lastState: () => `agent ${JSON.stringify(s.agents.registry.get(AGENT)?.status)}; agent log ${procs[0]?.log().slice(-1500) ?? ''}`,
    });
  };
  /** Runs `sh -c script` on the agent; resolves with its command id and exit code. */
  const run = async (s: ServerHandle, script: string): Promise<{ commandId: string; exitCode: number }> => {
    const client = new AgentCommandClient(s.service('actors'), s.agents);
    try {
      const r = await client.start(AGENT, { command: 'sh', args: ['-c', script], env: { API_TOKEN: 'hunter2-not-recorded' } }, {});
      const result = await r.result;
      return { commandId: r.commandId, exitCode: result.exit_code };
    } finally {
      client.stop();
    }
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-activity-self-'));
    grpcPort = await serverPort();
    server = await start();
    const ca = await ensureCa({ secretsDir: server.config.secretsDir, trustDomain: server.config.trustDomain });
    const certs = join(dir, 'agent-certs');
    await writeAgentBundle(certs, ca, { instanceId: INSTANCE });
    procs.push(spawnAgent({ server: `127.0.0.1:${grpcPort}`, certs, agentId: AGENT, instanceId: INSTANCE, workDir: dir }));
    await agentReady(server);
    sessionAgent = await spawnSessionAgent(
      { dir, grpc: grpcPort, secretsDir: server.config.secretsDir, trustDomain: server.config.trustDomain },
      SESSION_AGENT,
    );
    const s = server;
    await waitFor(`agent ${SESSION_AGENT} Ready`, () => s.agents.registry.get(SESSION_AGENT)?.status === 'Ready', {
      deadlineMs: DEADLINE_MS.agent,
      intervalMs: 100,
      lastState: () => `agent log ${sessionAgent?.log().slice(-1500) ?? ''}`,
    });
  });
  after(async () => {
    await sessionAgent?.kill();
    await killAll(procs);
    await server?.stop();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  test('a command shows command.started and command.finished, with its exit code and argv0 only', async () => {
    const s = server as ServerHandle;
    const { commandId, exitCode } = await run(s, 'echo printed-output-not-recorded; exit 3');
    assert.equal(exitCode, 3);
    const got = await eventsUntil(`the activity of command ${commandId}`, `command_id=${encodeURIComponent(commandId)}`, 2);
    assert.deepEqual(
      got.map((e) => e.event_name),
      ['command.started', 'command.finished'],
    );
    const [started, finished] = got as [ActivityEvent, ActivityEvent];
    for (const e of got) {
      assert.equal(e.correlation.command_id, commandId);
      assert.equal(e.correlation.agent_id, AGENT);
      assert.equal(e.correlation.instance_id, INSTANCE, "the agent's instance id");
      assert.equal(e.correlation.tenant_id, TENANT);
      assert.equal(e.correlation.host_id, HOST);
      assert.deepEqual(e.source, { collector: 'sandboxd', layer: 'control-plane', runtime: 'host', trust: 'observed' });
      assert.equal(e.sensitivity, 'metadata');
      assert.match(e.event_id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/, 'UUIDv7');
    }
    assert.equal(started.payload['argv0'], 'sh');
    assert.equal(started.outcome?.status, 'started');
    assert.deepEqual(finished.outcome, { status: 'failure', exit_code: 3 });
    assert.ok(finished.integrity.collector_sequence > started.integrity.collector_sequence);
    const text = JSON.stringify(got);
    for (const never of ['printed-output-not-recorded', 'hunter2', 'API_TOKEN', 'exit 3'])
      assert.ok(!text.includes(never), `${never} is not recorded`);
  });

  test('a session shows session.opened and session.closed; a posted v1 event is not recorded', async () => {
    const res = await fetch(`${base}/api/v1/agents/${SESSION_AGENT}/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ session_name: 'activity-term' }),
    });
    const created = (await res.json()) as { session_id: string; command_id: string };
    assert.equal(res.status, 200, JSON.stringify(created));
    const killed = await fetch(`${base}/api/v1/agents/${SESSION_AGENT}/sessions/${created.session_id}`, { method: 'DELETE' });
    assert.equal(killed.status, 200, await killed.text());
    const sessionEvents = (): Promise<ActivityEvent[]> =>
      waitFor(
        `the session ${created.session_id} opened and closed`,
        async () => {
          const got = (await events(`session_id=${created.session_id}`)).events.filter((e) => e.event_name.startsWith('session.'));
          return got.length >= 2 ? got : undefined;
        },
        { deadlineMs: DEADLINE_MS.process, intervalMs: 100 },
      );
    const got = await sessionEvents();
    assert.deepEqual(
      got.map((e) => e.event_name),
      ['session.opened', 'session.closed'],
    );
    const [opened, closed] = got as [ActivityEvent, ActivityEvent];
    assert.equal(opened.payload['session_name'], 'activity-term');
    assert.equal(opened.plane, 'session');
    for (const e of got) {
      assert.equal(e.correlation.command_id, created.command_id);
      assert.equal(e.correlation.agent_id, SESSION_AGENT);
    }
    assert.equal(closed.outcome?.reason, 'killed');

    // A client's POST /api/v1/events is stored as a v1 event, but sandboxd did not observe it.
    const forged = await fetch(`${base}/api/v1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        event_type: 'agent.command.started',
        agent_id: AGENT,
        details: { command_id: 'forged-cmd-1', command: 'rm' },
      }),
    });
    assert.equal(forged.status, 200);
    // A real command after it: once its events are stored, the forged one would have been too.
    const { commandId } = await run(server as ServerHandle, 'true');
    await eventsUntil(`the activity of command ${commandId}`, `command_id=${commandId}`, 2);
    assert.equal((await events('command_id=forged-cmd-1')).events.length, 0);
  });

  test("a task's tool calls appear with the task, the tool call id and the tool's name", async () => {
    const repo = join(dir, 'repo');
    await initGitRepo(repo);
    const manifest = {
      name: 'activity-tools',
      repository: { url: repo },
      agent: { prompt: 'greet', model: 'claude-test-1', command: FAKE_COMMAND },
    };
    const submitted = await fetch(`${base}/api/v1/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ manifest }),
    });
    const body = (await submitted.json()) as { task_id: string };
    assert.equal(submitted.status, 202, JSON.stringify(body));
    const taskId = body.task_id;
    await waitFor(
      `task ${taskId} to finish`,
      async () => {
        const t = (await (await fetch(`${base}/api/v1/tasks/${taskId}`)).json()) as { state: string };
        return ['completed', 'failed', 'failed_preserved', 'cancelled'].includes(t.state) ? t : undefined;
      },
      { deadlineMs: 3 * DEADLINE_MS.endToEnd, intervalMs: 250 },
    );
    const calls = await eventsUntil(`the tool calls of ${taskId}`, `task_id=${taskId}`, 10);
    const started = calls.filter((e) => e.event_name === 'tool.call_started');
    const finished = calls.filter((e) => e.event_name === 'tool.call_finished');
    assert.deepEqual(
      started.map((e) => e.payload['tool_name']),
      ['Read', 'Edit', 'Bash', 'Write', 'Write'],
    );
    assert.deepEqual(
      finished.map((e) => e.correlation.tool_call_id),
      started.map((e) => e.correlation.tool_call_id),
      'each call finished, in order',
    );
    for (const e of calls) {
      assert.equal(e.correlation.task_id, taskId);
      assert.equal(e.correlation.command_id, taskId);
      assert.match(e.correlation.tool_call_id ?? '', /^toolu_/);
      assert.equal(e.plane, 'action');
    }
    assert.ok(finished.every((e) => e.outcome?.status === 'success'));
    // The tool's input (file paths, the command) and its result are not recorded.
    assert.ok(!JSON.stringify(calls).includes('hello.txt'));
    assert.ok(!JSON.stringify(calls).includes('git diff'));
  });

  test('after a restart of sandboxd the sequences go on: no conflict, no jump, no gap', async () => {
    const before = await selfCoverage();
    assert.ok(before !== undefined && before.last_sequence !== null);
    await (server as ServerHandle).stop();
    server = null;
    server = await start();
    await agentReady(server);
    const { commandId } = await run(server, 'exit 0');
    const got = await eventsUntil(`the activity of command ${commandId} after the restart`, `command_id=${commandId}`, 2);
    const after = await selfCoverage();
    assert.ok(after !== undefined);
    // Everything the first run recorded is stored (its last flush came at stop), and the new run
    // numbers on from it: the agent's reconnect may add events (none recorded today) before the command.
    const lastBefore = before.last_sequence ?? 0;
    assert.ok(
      got[0] !== undefined && got[0].integrity.collector_sequence > lastBefore,
      `${got[0]?.integrity.collector_sequence} > ${lastBefore}`,
    );
    assert.equal(after.durable_through_sequence, after.last_sequence, 'no gap: every sequence is stored');
    assert.deepEqual(after.sequence_gaps, []);
    assert.equal(after.jump_count, 0);
    assert.equal(after.first_sequence, 1);
    assert.equal(after.event_count, after.last_sequence, 'one event per sequence, from 1');
  });
});
