/**
 * A client written from proto/ alone (agents-proto-only-client.ts loads the .proto at run time
 * and imports none of sandboxd's code) registers as an agent, is listed Ready, and answers a
 * command an operator runs with Exec through the same run-time-loaded contract.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { issueAgentCert, issueOperatorCert } from '../../src/identity/ca.js';
import { agentOf, startTestServer, waitFor, waitForStatus, type TestServer } from './agents-harness.js';
import { ProtoOnlyAgent, protoOnlyExec } from './agents-proto-only-client.js';

void describe('a client written from proto/ alone', () => {
  let ts: TestServer;
  let agent: ProtoOnlyAgent | undefined;
  before(async () => {
    ts = await startTestServer({ SVC_AGENT_HEARTBEAT_SECONDS: '5' });
  });
  after(async () => {
    agent?.close();
    await ts.stop();
  });

  void test('registers, is listed Ready, and runs a command an operator sends with Exec', async () => {
    const cert = await issueAgentCert(ts.ca, { instanceId: 'i-proto' });
    agent = new ProtoOnlyAgent(
      ts.grpcTarget,
      { ca: ts.ca.caCertPem, cert: cert.certPem, key: cert.keyPem },
      { agentId: 'agent-proto', instanceId: 'i-proto' },
    );
    const ack = await agent.acked;
    assert.equal(ack?.accepted, true);
    assert.equal(ack?.heartbeat_interval_seconds, 5);
    await waitForStatus(ts, 'agent-proto', 'Ready');
    const listed = await waitFor('metrics listed', async () => {
      const a = await agentOf(ts, 'agent-proto');
      return a?.['metrics'] !== undefined ? a : undefined;
    });
    assert.equal(listed.hostname, 'proto-only-host');
    assert.deepEqual(listed['system_info'], { os: 'Linux', kernel: '6.1', cpu_cores: 1, memory_bytes: 4096, disk_bytes: 2 });
    assert.deepEqual((listed['metrics'] as { load_avg: number[] }).load_avg, [0.1, 0.2, 0.3]);

    const op = await issueOperatorCert(ts.ca, { name: 'proto-operator' });
    const out = await protoOnlyExec(
      ts.grpcTarget,
      { ca: ts.ca.caCertPem, cert: op.certPem, key: op.keyPem },
      { agent_id: 'agent-proto', command: 'echo', args: ['hi', 'there'] },
    );
    assert.equal(out.status.code, 0, out.status.details);
    const stdout = Buffer.concat(out.items.filter((i) => i.stream === 'STREAM_STDOUT').map((i) => i.data)).toString();
    const stderr = Buffer.concat(out.items.filter((i) => i.stream === 'STREAM_STDERR').map((i) => i.data)).toString();
    assert.equal(stdout, 'ran echo hi there\n');
    assert.equal(stderr, 'note\n');
    const last = out.items.at(-1);
    assert.equal(last?.complete, true);
    assert.equal(last?.exit_code, 0);
    assert.ok(agent.received.includes('command'));
  });
});
