import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { transitionTableMarkdown } from '../../../src/core/state-machine.js';
import { TASK_STATE_LABELS } from '../../../src/observability/metrics.js';
import {
  canTransition,
  failureStateFor,
  isTerminal,
  newTaskId,
  newTaskRecord,
  TASK_ID_RE,
  TASK_STATES,
  TASK_TRANSITION_TRIGGERS,
  TASK_TRANSITIONS,
  TaskTransitionError,
  transition,
  tryTransition,
  type TaskState,
  type TaskStateEvent,
} from '../../../src/tasks/task-state.js';

const HAPPY_PATH: TaskState[] = ['pending', 'staging', 'provisioning', 'ready', 'running', 'completing', 'completed'];

function clock(start = Date.parse('2026-01-01T00:00:00Z')): () => Date {
  let t = start;
  return () => new Date((t += 1000));
}

describe('task states', () => {
  test('the spec’s ten states, the same set the metrics pre-initialise', () => {
    assert.deepEqual([...TASK_STATES], [...TASK_STATE_LABELS]);
  });

  test('the happy path is allowed in order, and only forward', () => {
    for (let i = 0; i + 1 < HAPPY_PATH.length; i++) {
      assert.ok(canTransition(HAPPY_PATH[i]!, HAPPY_PATH[i + 1]!));
      for (let j = 0; j < i; j++) assert.ok(!canTransition(HAPPY_PATH[i]!, HAPPY_PATH[j]!), `${HAPPY_PATH[i]} -> ${HAPPY_PATH[j]}`);
      for (let j = i + 2; j < HAPPY_PATH.length; j++) assert.ok(!canTransition(HAPPY_PATH[i]!, HAPPY_PATH[j]!), `no skipping ${HAPPY_PATH[i]} -> ${HAPPY_PATH[j]}`);
    }
  });

  test('failure edges, preservation edges and cancel are exactly as documented', () => {
    for (const s of ['pending', 'staging', 'provisioning', 'ready', 'running', 'completing'] as const) {
      assert.ok(canTransition(s, 'failed'), `${s} -> failed`);
      assert.ok(canTransition(s, 'cancelled'), `${s} -> cancelled`);
    }
    const preserving = TASK_STATES.filter((s) => canTransition(s, 'failed_preserved'));
    assert.deepEqual(preserving, ['running', 'completing']);
    for (const s of ['completed', 'failed', 'failed_preserved', 'cancelled'] as const) {
      assert.ok(isTerminal(s));
      assert.deepEqual(TASK_TRANSITIONS[s], [], `${s} is terminal`);
    }
  });

  test('every move has a documented trigger, and the README table renders from the code', () => {
    for (const from of TASK_STATES) for (const to of TASK_TRANSITIONS[from]) assert.ok(TASK_TRANSITION_TRIGGERS[from]?.[to], `${from} -> ${to}`);
    const md = transitionTableMarkdown(TASK_TRANSITIONS, TASK_TRANSITION_TRIGGERS);
    assert.match(md, /\| running \| failed_preserved \| the same, with failure_action preserve/u);
  });

  test('ids are task-<uuid>', () => {
    const id = newTaskId();
    assert.match(id, TASK_ID_RE);
    assert.notEqual(newTaskId(), id);
  });
});

describe('transition()', () => {
  test('walks the happy path recording message, times, started_at and one event per move', () => {
    const events: TaskStateEvent[] = [];
    const now = clock();
    const task = newTaskRecord('task-1', 'demo', now());
    for (const to of HAPPY_PATH.slice(1)) transition(task, to, `entered ${to}`, { emit: (e) => events.push(e), failureAction: 'destroy', now });
    assert.deepEqual(events.map((e) => [e.from, e.to]), HAPPY_PATH.slice(0, -1).map((from, i) => [from, HAPPY_PATH[i + 1]]));
    assert.equal(task.state, 'completed');
    assert.equal(task.state_message, 'entered completed');
    assert.equal(task.state_changed_at, events.at(-1)?.at);
    assert.equal(task.started_at, events.find((e) => e.to === 'running')?.at, 'started_at is when the agent started');
    assert.ok(Date.parse(task.state_changed_at) > Date.parse(task.created_at));
    assert.equal(task.error, null);
  });

  test('illegal moves throw and change nothing', () => {
    const task = newTaskRecord('task-1', 'demo', new Date());
    const before = structuredClone(task);
    const emitted: unknown[] = [];
    assert.throws(() => transition(task, 'running', 'skip', { emit: (e) => emitted.push(e), failureAction: 'destroy' }), TaskTransitionError);
    assert.throws(() => transition(task, 'pending', 'same', { emit: (e) => emitted.push(e), failureAction: 'destroy' }), TaskTransitionError);
    assert.deepEqual(task, before);
    assert.deepEqual(emitted, []);
  });

  test('failed_preserved needs failure_action preserve', () => {
    const task = { ...newTaskRecord('task-1', 'demo', new Date()), state: 'running' as TaskState };
    assert.throws(() => transition(task, 'failed_preserved', 'x', { emit: () => undefined, failureAction: 'destroy' }), /failure_action: preserve/u);
    transition(task, 'failed_preserved', 'exit 3', { emit: () => undefined, failureAction: 'preserve', exitCode: 3 });
    assert.equal(task.state, 'failed_preserved');
    assert.equal(task.exit_code, 3);
    assert.equal(task.error, 'exit 3', 'error defaults to the message on failure');
  });

  test('failureStateFor picks preservation only where it is allowed', () => {
    assert.equal(failureStateFor('running', 'preserve'), 'failed_preserved');
    assert.equal(failureStateFor('completing', 'preserve'), 'failed_preserved');
    assert.equal(failureStateFor('staging', 'preserve'), 'failed');
    assert.equal(failureStateFor('running', 'destroy'), 'failed');
  });

  test('tryTransition refuses quietly when the task moved on (a step finishing after a cancel)', () => {
    const task = newTaskRecord('task-1', 'demo', new Date());
    const opts = { emit: () => undefined, failureAction: 'destroy' as const };
    transition(task, 'staging', 'cloning', opts);
    transition(task, 'cancelled', 'cancelled: user', opts);
    assert.equal(tryTransition(task, ['staging'], 'provisioning', 'cloned', opts), false);
    assert.equal(task.state, 'cancelled');
  });

  test('long messages are clipped', () => {
    const task = newTaskRecord('task-1', 'demo', new Date());
    transition(task, 'failed', 'x'.repeat(5000), { emit: () => undefined, failureAction: 'destroy' });
    assert.equal(task.state_message.length, 1024);
    assert.equal(task.error?.length, 1024);
  });

  test('property: any sequence of attempted moves keeps the record consistent with the table', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...TASK_STATES), { maxLength: 20 }), fc.constantFrom('destroy', 'preserve' as const), (targets, action) => {
        const task = newTaskRecord('task-1', 'demo', new Date());
        const events: TaskStateEvent[] = [];
        for (const to of targets) {
          const from = task.state;
          const legal = canTransition(from, to) && (to !== 'failed_preserved' || action === 'preserve');
          try {
            transition(task, to, 'm', { emit: (e) => events.push(e), failureAction: action });
            assert.ok(legal, `${from} -> ${to} went through`);
          } catch (err) {
            assert.ok(err instanceof TaskTransitionError && !legal, `${from} -> ${to}`);
            assert.equal(task.state, from);
          }
        }
        // Events chain: each starts where the previous ended; at most one terminal state, last.
        events.forEach((e, i) => assert.equal(e.from, i === 0 ? 'pending' : events[i - 1]!.to));
        assert.ok(events.slice(0, -1).every((e) => !isTerminal(e.to)));
      }),
    );
  });
});
