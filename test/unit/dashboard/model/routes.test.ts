import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { href, parseRoute, sectionOf } from '../../../../src/dashboard/model/routes.js';

describe('dashboard routes', () => {
  test('each view has its hash', () => {
    assert.deepEqual(parseRoute(''), { view: 'fleet' });
    assert.deepEqual(parseRoute('#/'), { view: 'fleet' });
    assert.deepEqual(parseRoute('#/agents/a%2Fb'), { view: 'agent', agentId: 'a/b' });
    assert.deepEqual(parseRoute('#/agents/a/sessions/s-1'), { view: 'terminal', agentId: 'a', sessionId: 's-1' });
    assert.deepEqual(parseRoute('#/tasks/task-1'), { view: 'task', taskId: 'task-1' });
    const tasks = parseRoute('#/tasks?state=running');
    assert.equal(tasks.view, 'tasks');
    assert.equal(tasks.view === 'tasks' ? tasks.query.get('state') : null, 'running');
    const ev = parseRoute('#/events?type=vm.&agent=a');
    assert.equal(ev.view === 'events' ? ev.query.get('type') : null, 'vm.');
    assert.equal(parseRoute('#/nope').view, 'not-found');
    assert.equal(parseRoute('#/agents/%E0%A4%A').view, 'not-found');
  });

  test('href and parseRoute round-trip any id', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), (a, s) => {
        assert.deepEqual(parseRoute(href.agent(a)), { view: 'agent', agentId: a });
        assert.deepEqual(parseRoute(href.terminal(a, s)), { view: 'terminal', agentId: a, sessionId: s });
        assert.deepEqual(parseRoute(href.task(s)), { view: 'task', taskId: s });
      }),
    );
  });

  test('navigation sections', () => {
    assert.equal(sectionOf(parseRoute('#/agents/x')), 'fleet');
    assert.equal(sectionOf(parseRoute('#/tasks/x')), 'tasks');
    assert.equal(sectionOf(parseRoute('#/events')), 'events');
    assert.equal(sectionOf(parseRoute('#/zzz')), null);
    assert.equal(href.events(new URLSearchParams({ type: 'vm.' })), '#/events?type=vm.');
    assert.equal(href.tasks(new URLSearchParams()), '#/tasks');
  });
});
