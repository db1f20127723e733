/**
 * A2A on the whole server (every component of src/main.ts, so the a2a component's place before
 * sessions is what runs in production): a VM on libvirt's test driver with its local agent, a
 * message sent over pty-ws/v1 to the VM's instance, then `sbx a2a output|artifacts|card` as a
 * user runs them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { A2aWsClient, textMessage, untilTerminal } from './a2a-bed.js';
import { runSbx, sbxJson, startCliServer, vmName, waitFor, type CliServer } from './cli-harness.js';

let srv: CliServer;
let vm = '';
let instanceId = '';

before(async () => {
  srv = await startCliServer();
  vm = vmName('a2a');
  const created = await runSbx(srv, ['vm', 'create', vm]);
  assert.equal(created.code, 0, created.stderr);
  await waitFor(`the agent of VM ${vm} to be Ready`, async () => {
    const list = await sbxJson<{ agents: { id: string; status: string }[] }>(srv, ['agent', 'list']);
    return list.agents.find((a) => a.id === vm && a.status === 'Ready')?.id;
  });
  instanceId = (await sbxJson<{ uuid: string }>(srv, ['vm', 'get', vm])).uuid;
});
after(async () => {
  if (vm !== '') await runSbx(srv, ['vm', 'delete', vm, '--force', '--delete-disk']);
  await srv?.stop();
});

describe('sbx a2a', () => {
  test('a task sent to a VM instance; sbx a2a output prints exactly what the command printed; card names the binding', async () => {
    const c = await A2aWsClient.open(srv.baseUrl.replace(/^http/, 'ws'), instanceId);
    let taskId: string;
    try {
      const sent = await c.call('SendMessage', { message: textMessage("printf 'out-1\\nout-2\\n'; printf 'err-1\\n' >&2") });
      assert.equal(sent.op, 'SendMessage.Response', JSON.stringify(sent.payload));
      taskId = String(sent.payload['task'].id);
      assert.equal((await untilTerminal(c, taskId))['status'].state, 'TASK_STATE_COMPLETED');
    } finally {
      c.close();
    }
    const out = await runSbx(srv, ['a2a', 'output', instanceId, taskId]);
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stdout, 'out-1\nout-2\n');
    assert.equal(out.stderr, 'err-1\n');
    const list = await sbxJson<{ task_id: string; artifacts: { artifact: { stream: string } }[] }>(srv, [
      'a2a',
      'artifacts',
      instanceId,
      taskId,
    ]);
    assert.equal(list.task_id, taskId);
    assert.ok(list.artifacts.some((a) => a.artifact.stream === 'stderr'));
    const missing = await runSbx(srv, ['a2a', 'output', instanceId, 'no-such-task']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /a2a\.task_not_found/);
    const card = await sbxJson<{ preferredTransport: string }>(srv, ['a2a', 'card', instanceId]);
    assert.equal(card.preferredTransport, 'https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1');
  });
});
