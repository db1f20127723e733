/**
 * AgentCommandClient against a real agent: a real sandbox-agent process over mTLS gRPC, its
 * connection actor in a worker shard (startServer with the events, actors, agents and gRPC
 * listener components). Output comes back in order on the handle that started the
 * command (and only there), the result carries the exit code, a signal reaches the command's whole
 * process group (a `sleep` grandchild dies with it, 128 + 15), stdin reaches the command, and an
 * unknown agent is agent.not_found.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import type { AgentService } from '../../src/agent-link/agent-service.js';
import { AgentCommandClient, type OutputStreamName } from '../../src/agent-link/command-client.js';
import { agentListenerComponent, agentsComponent } from '../../src/agent-link/component.js';
import { SvcError } from '../../src/core/errors.js';
import { eventsComponent } from '../../src/events/component.js';
import { ensureCa, writeAgentBundle } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { actorsComponent } from '../../src/server/runtime-components.js';
import { loopbackConfig } from '../support/test-config.js';
import { killAll, spawnAgent, type AgentProcess } from './agents-harness.js';
import { alive, until } from './tasks-harness.js';

interface Collected {
  chunks: Array<{ stream: OutputStreamName; text: string; seq: number }>;
  text(stream: OutputStreamName): string;
}

function collector(): Collected & { output(stream: OutputStreamName, data: Buffer, seq: number): void } {
  const chunks: Collected['chunks'] = [];
  return {
    chunks,
    output: (stream, data, seq) => chunks.push({ stream, text: data.toString('utf8'), seq }),
    text: (stream) =>
      chunks
        .filter((c) => c.stream === stream)
        .map((c) => c.text)
        .join(''),
  };
}

void describe('AgentCommandClient with a real agent', () => {
  const agentId = 'agent-cmdclient-1';
  let dir: string;
  let server: ServerHandle;
  let agents: AgentService;
  let client: AgentCommandClient;
  const procs: AgentProcess[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sandboxd-cmdclient-'));
    const config = loopbackConfig(dir, { SVC_ACTORS: 'workers', SVC_ACTOR_SHARDS: '2', SVC_SHUTDOWN_DEADLINE_MS: '5000' });
    server = await startServer(config, pino({ level: 'silent' }), {
      components: [eventsComponent(), actorsComponent, agentsComponent, agentListenerComponent],
      metrics: createMetrics({ defaultMetrics: false }),
    });
    agents = server.agents;
    const ca = await ensureCa({ secretsDir: config.secretsDir, trustDomain: config.trustDomain });
    const certs = join(dir, 'agent-certs');
    await writeAgentBundle(certs, ca, { instanceId: 'i-cmdclient-1' });
    procs.push(spawnAgent({ server: `127.0.0.1:${server.ports.grpc}`, certs, agentId, instanceId: 'i-cmdclient-1', workDir: dir }));
    await until('the agent Ready', () => agents.registry.get(agentId)?.status === 'Ready', 60_000);
    client = new AgentCommandClient(server.service('actors'), agents);
  });

  after(async () => {
    client.stop();
    await killAll(procs);
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  void test('output arrives in order on its own handle; the result carries the exit code', async () => {
    const a = collector();
    const b = collector();
    const [ra, rb] = await Promise.all([
      client.start(
        agentId,
        { command: 'sh', args: ['-c', 'for i in 1 2 3; do echo "a$i"; done; echo oops >&2; exit 7'], workingDir: '/tmp' },
        a,
      ),
      client.start(agentId, { command: 'printf', args: ['%s', 'only b'], env: { UNUSED: '1' } }, b),
    ]);
    assert.notEqual(ra.commandId, rb.commandId);
    const [resA, resB] = await Promise.all([ra.result, rb.result]);
    assert.equal(resA.exit_code, 7);
    assert.equal(resA.success, false);
    assert.equal(resA.command_id, ra.commandId);
    assert.equal(a.text('stdout'), 'a1\na2\na3\n');
    assert.equal(a.text('stderr'), 'oops\n');
    const seqs = a.chunks.map((c) => c.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((x, y) => x - y),
      'seqs increase',
    );
    assert.equal(resB.exit_code, 0);
    assert.equal(b.text('stdout'), 'only b', 'no output of the other command');
    assert.ok(!a.text('stdout').includes('only b'));
  });

  void test('the command id given is used; stdin reaches the command', async () => {
    const c = collector();
    const run = await client.start(agentId, { commandId: 'cmd-client-stdin-1', command: 'cat' }, c);
    assert.equal(run.commandId, 'cmd-client-stdin-1');
    await run.stdin(Buffer.from('through stdin\n'), true);
    const res = await run.result;
    assert.equal(res.exit_code, 0);
    assert.equal(c.text('stdout'), 'through stdin\n');
  });

  void test('a signal reaches the whole process group: the sleep grandchild dies, exit code 128+15', async () => {
    const c = collector();
    const run = await client.start(agentId, { command: 'sh', args: ['-c', 'sleep 300 & echo "$!"; wait'] }, c);
    await until('the grandchild pid printed', () => /^\d+\n/.test(c.text('stdout')), 30_000);
    const pid = Number(c.text('stdout').trim());
    assert.ok(alive(pid));
    await run.signal(15);
    const res = await run.result;
    assert.equal(res.exit_code, 128 + 15);
    await until('the grandchild gone', () => !alive(pid), 10_000);
  });

  void test('an unknown agent is agent.not_found; bad arguments are refused', async () => {
    await assert.rejects(
      client.start('agent-nobody', { command: 'true' }),
      (err: unknown) => err instanceof SvcError && err.code === 'agent.not_found',
    );
    await assert.rejects(
      client.start(agentId, { commandId: 'bad id with spaces', command: 'true' }),
      (err: unknown) => err instanceof SvcError && err.code === 'request.invalid',
    );
  });
});
