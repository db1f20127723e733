/**
 * The six A2A core operations on a real pty-ws/v1 WebSocket (binding spec section 4), against a
 * real sandboxd and agent, with frames written from the published binding and the A2A shapes:
 * binding_hello lists them; SendStreamingMessage and SubscribeToTask deliver TaskStatusUpdate
 * frames up to a terminal state; CancelTask cancels and the command's process is gone; GetTask
 * and ListTasks read the same store; bad requests get the binding's Error frames.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { A2aWsClient, textMessage, untilTerminal, useA2aBed, type Frame } from './a2a-bed.js';
import { pidAlive } from './sessions-harness.js';

const bed = useA2aBed('a2a-bind-1');
const SIX = ['SendMessage', 'SendStreamingMessage', 'GetTask', 'ListTasks', 'CancelTask', 'SubscribeToTask'];
const TERMINAL = /^TASK_STATE_(COMPLETED|FAILED|CANCELED|REJECTED|INPUT_REQUIRED)$/;

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'a2a-bind-'));
});
after(async () => {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

function stateOf(f: Frame): string {
  return String(f.payload['task']?.status?.state);
}

/** The updates of a task end with exactly one terminal frame, marked final, and nothing after it. */
function assertEndsOnce(updates: Frame[]): void {
  const terminal = updates.filter((f) => TERMINAL.test(stateOf(f)));
  assert.equal(terminal.length, 1, `one terminal update: ${updates.map(stateOf).join(', ')}`);
  assert.equal(updates[updates.length - 1], terminal[0], 'the terminal update is the last one');
  assert.equal(terminal[0]?.payload['delta']?.final, true);
}

describe('A2A core operations on pty-ws.v1', () => {
  test('binding_hello lists the six A2A core operations', async () => {
    const c = await A2aWsClient.open(bed.srv.wsBase, bed.instanceId);
    try {
      const ops = c.hello.payload['supported_operations'] as string[];
      for (const op of SIX) assert.ok(ops.includes(op), `supported_operations lists ${op}`);
    } finally {
      assert.deepEqual(c.invalidFrames(), [], 'every frame matches the binding schema');
      c.close();
    }
  });

  test('SendStreamingMessage: Accepted, then TaskStatusUpdate frames to COMPLETED; a failing command ends FAILED', async () => {
    const c = await A2aWsClient.open(bed.srv.wsBase, bed.instanceId);
    try {
      const acc = await c.call('SendStreamingMessage', { message: textMessage('echo streamed') });
      assert.equal(acc.op, 'SendStreamingMessage.Accepted', JSON.stringify(acc.payload));
      const taskId = acc.payload['task_id'] as string;
      assert.equal(typeof taskId, 'string');
      const accIndex = c.frames.indexOf(acc);
      await c.waitFor(
        'the final update',
        (f) => f.op === 'TaskStatusUpdate' && f.payload['task']?.id === taskId && TERMINAL.test(stateOf(f)),
      );
      const updates = c.updates(taskId);
      assert.ok(
        updates.every((u) => c.frames.indexOf(u) > accIndex),
        'updates come after the Accepted answer',
      );
      assert.equal(stateOf(updates[updates.length - 1] as Frame), 'TASK_STATE_COMPLETED');
      assert.ok(updates.some((u) => stateOf(u) === 'TASK_STATE_WORKING'));
      assertEndsOnce(updates);
      for (const u of updates) assert.equal(typeof u.sequence, 'number');
      assert.equal(updates[0]?.payload['delta']?.taskId, taskId);

      const failing = await c.call('SendStreamingMessage', { message: textMessage('echo no >&2; exit 3') });
      const failId = failing.payload['task_id'] as string;
      await c.waitFor(
        'the failing task to end',
        (f) => f.op === 'TaskStatusUpdate' && f.payload['task']?.id === failId && TERMINAL.test(stateOf(f)),
      );
      const last = c.updates(failId).at(-1) as Frame;
      assert.equal(stateOf(last), 'TASK_STATE_FAILED');
      assert.equal(last.payload['task'].metadata.exit_code, 3);
    } finally {
      assert.deepEqual(c.invalidFrames(), [], 'every frame matches the binding schema');
      c.close();
    }
  });

  test('SendMessage, GetTask and ListTasks read the same task; unknown task → Error TASK_NOT_FOUND with a2a_error', async () => {
    const c = await A2aWsClient.open(bed.srv.wsBase, bed.instanceId);
    try {
      const sent = await c.call('SendMessage', { message: textMessage('echo listed'), configuration: { blocking: true } });
      assert.equal(sent.op, 'SendMessage.Response');
      const task = sent.payload['task'];
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED', 'blocking waits for the end');
      const got = await c.call('GetTask', { task_id: task.id, history_length: 10 });
      assert.equal(got.op, 'GetTask.Response');
      assert.equal(got.payload['task'].id, task.id);
      assert.equal(got.payload['task'].history[0].parts[0].text, 'echo listed');

      const page1 = await c.call('ListTasks', { page_size: 1, page_token: null, filter: null });
      assert.equal(page1.op, 'ListTasks.Response');
      assert.equal(page1.payload['tasks'].length, 1);
      assert.equal(page1.payload['tasks'][0].id, task.id, 'newest first');
      assert.ok(page1.payload['next_page_token'] !== '', 'more tasks than one page');
      const page2 = await c.call('ListTasks', { page_size: 50, page_token: page1.payload['next_page_token'] });
      assert.ok(!(page2.payload['tasks'] as { id: string }[]).some((t) => t.id === task.id), 'the next page starts after the token');

      const missing = await c.call('GetTask', { task_id: 'no-such-task' });
      assert.equal(missing.op, 'Error');
      assert.equal(missing.payload['code'], 'TASK_NOT_FOUND');
      assert.deepEqual(missing.payload['a2a_error'], { type: 'TaskNotFound' });

      const noText = await c.call('SendMessage', { message: { messageId: 'm-1', role: 'ROLE_USER', parts: [{ data: { x: 1 } }] } });
      assert.equal(noText.op, 'Error');
      assert.equal(noText.payload['code'], 'INVALID_REQUEST');
      const stillUp = await c.call('ping', { client_ts: new Date().toISOString() });
      assert.equal(stillUp.op, 'pong', 'a refused A2A request does not end the connection');
    } finally {
      assert.deepEqual(c.invalidFrames(), [], 'every frame matches the binding schema');
      c.close();
    }
  });

  test('SubscribeToTask from another connection sees TaskStatusUpdate frames up to the terminal state', async () => {
    const gate = join(dir, 'go');
    const owner = await A2aWsClient.open(bed.srv.wsBase, bed.instanceId);
    const watcher = await A2aWsClient.open(bed.srv.wsBase, bed.instanceId);
    try {
      const sent = await owner.call('SendMessage', {
        message: textMessage(`while [ ! -e '${gate}' ]; do sleep 0.05; done; echo released`),
      });
      const taskId = sent.payload['task'].id as string;
      assert.equal(sent.payload['task'].status.state, 'TASK_STATE_WORKING');
      const acc = await watcher.call('SubscribeToTask', { task_id: taskId });
      assert.equal(acc.op, 'SubscribeToTask.Accepted');
      assert.equal(typeof acc.payload['current_sequence'], 'number');
      const first = await watcher.waitFor('the current state', (f) => f.op === 'TaskStatusUpdate' && f.payload['task']?.id === taskId);
      assert.equal(stateOf(first), 'TASK_STATE_WORKING');
      await writeFile(gate, '');
      await watcher.waitFor(
        'the terminal update',
        (f) => f.op === 'TaskStatusUpdate' && f.payload['task']?.id === taskId && TERMINAL.test(stateOf(f)),
      );
      const updates = watcher.updates(taskId);
      assert.equal(stateOf(updates.at(-1) as Frame), 'TASK_STATE_COMPLETED');
      assertEndsOnce(updates);
      const unknown = await watcher.call('SubscribeToTask', { task_id: 'not-a-task' });
      assert.equal(unknown.payload['code'], 'TASK_NOT_FOUND');
    } finally {
      assert.deepEqual([...owner.invalidFrames(), ...watcher.invalidFrames()], [], 'every frame matches the binding schema');
      owner.close();
      watcher.close();
    }
  });

  test("on a session's own URL (/api/v1/sessions/{id}/pty) the ops reach the same instance's tasks", async () => {
    const made = await bed.srv.json<{ session_id: string }>('POST', `/api/v1/agents/${bed.instanceId}/sessions`, {
      session_name: 'a2a-s1',
    });
    assert.equal(made.status, 200, JSON.stringify(made.body));
    const viaAttach = await A2aWsClient.open(bed.srv.wsBase, bed.instanceId);
    const viaSession = await A2aWsClient.openUrl(`${bed.srv.wsBase}/api/v1/sessions/${made.body.session_id}/pty`);
    try {
      const sent = await viaAttach.call('SendMessage', { message: textMessage('echo via-attach'), configuration: { blocking: true } });
      const taskId = String(sent.payload['task'].id);
      const got = await viaSession.call('GetTask', { task_id: taskId });
      assert.equal(got.op, 'GetTask.Response');
      assert.equal(got.payload['task'].status.state, 'TASK_STATE_COMPLETED');
      assert.ok((viaSession.hello.payload['supported_operations'] as string[]).includes('SubscribeToTask'));
    } finally {
      assert.deepEqual([...viaAttach.invalidFrames(), ...viaSession.invalidFrames()], [], 'every frame matches the binding schema');
      viaAttach.close();
      viaSession.close();
    }
  });

  test('CancelTask cancels a running task, its subscribers get the final CANCELED update, and the command is killed', async () => {
    const pidFile = join(dir, 'pid');
    const owner = await A2aWsClient.open(bed.srv.wsBase, bed.instanceId);
    const watcher = await A2aWsClient.open(bed.srv.wsBase, bed.instanceId);
    try {
      const sent = await owner.call('SendMessage', { message: textMessage(`echo $$ > '${pidFile}'; exec sleep 300`) });
      const taskId = sent.payload['task'].id as string;
      await waitFor('the command to write its pid', () => existsSync(pidFile) && readFile(pidFile, 'utf8').then((t) => /^\d+\n$/.test(t)), {
        deadlineMs: DEADLINE_MS.process,
      });
      const pid = Number((await readFile(pidFile, 'utf8')).trim());
      assert.ok(pidAlive(pid), 'the command runs');
      await watcher.call('SubscribeToTask', { task_id: taskId });

      const canceled = await owner.call('CancelTask', { task_id: taskId });
      assert.equal(canceled.op, 'CancelTask.Response', JSON.stringify(canceled.payload));
      assert.equal(canceled.payload['task'].status.state, 'TASK_STATE_CANCELED');
      await watcher.waitFor('the CANCELED update', (f) => f.op === 'TaskStatusUpdate' && stateOf(f) === 'TASK_STATE_CANCELED');
      assertEndsOnce(watcher.updates(taskId));
      await waitFor(`process ${pid} to be gone`, () => !pidAlive(pid), { deadlineMs: DEADLINE_MS.process, intervalMs: 50 });
      const after = await untilTerminal(owner, taskId);
      assert.equal(after['status'].state, 'TASK_STATE_CANCELED');

      const again = await owner.call('CancelTask', { task_id: taskId });
      assert.equal(again.op, 'Error');
      assert.equal(again.payload['code'], 'TASK_NOT_CANCELABLE');
    } finally {
      assert.deepEqual([...owner.invalidFrames(), ...watcher.invalidFrames()], [], 'every frame matches the binding schema');
      owner.close();
      watcher.close();
    }
  });
});
