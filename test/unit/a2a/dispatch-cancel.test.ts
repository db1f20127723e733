/**
 * CancelTask (src/a2a/dispatch.ts) on a task the dispatcher did not start: a dispatched mission's
 * task (src/missions records its missions in the same store) runs a command the A2A dispatcher
 * does not hold, so canceling it over A2A would mark it canceled while the command ran on. It is
 * refused, and the task keeps its state; a task the dispatcher prepared is canceled.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { AgentCommandClient } from '../../../src/agent-link/command-client.js';
import { A2aDispatcher } from '../../../src/a2a/dispatch.js';
import { A2aTaskStore } from '../../../src/a2a/task-store.js';
import type { ParsedMessage } from '../../../src/a2a/wire.js';
import { SvcError } from '../../../src/core/errors.js';

describe('A2A CancelTask', () => {
  test("a mission's task is not canceled over A2A; a task A2A prepared is", () => {
    const store = new A2aTaskStore();
    const commands = { start: () => assert.fail('no command is started by a cancel') } as unknown as AgentCommandClient;
    const dispatcher = new A2aDispatcher({
      store,
      commands,
      agents: { byInstance: () => ({ agentId: 'agent-x', connected: true }) },
      timeoutSeconds: 5,
    });
    // As the missions feature records one: created and working, its command run by missions.
    store.create({ instanceId: 'inst-1', text: 'objective', messageId: 'm-1', taskId: 'mission-1', commandId: 'mission-cmd' });
    store.transition('mission-1', 'working', 'mission_started');
    assert.throws(
      () => dispatcher.cancel('inst-1', 'mission-1'),
      (e: unknown) => e instanceof SvcError && e.code === 'a2a.task_not_cancelable' && /not started over A2A/.test(e.message),
    );
    assert.equal(store.get('inst-1', 'mission-1')?.state, 'working');

    const message: ParsedMessage = { messageId: 'm-2', text: 'true', contextId: undefined, taskId: undefined };
    const mine = dispatcher.prepare('inst-1', message);
    assert.equal(dispatcher.cancel('inst-1', mine.id).state, 'canceled');
  });
});
