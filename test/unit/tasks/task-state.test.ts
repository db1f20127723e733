import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { transitionTableMarkdown } from '../../../src/core/state-machine.js';
import { TASK_ID_RE } from '../../../src/core/ids.js';
import { TASK_STATE_LABELS } from '../../../src/observability/metrics.js';
import {
  canTransition,
  failureStateFor,
  isTerminal,
  newTaskId,
  newTaskRecord,
  TASK_STATES,
  TASK_TRANSITION_TRIGGERS,
  TASK_TRANSITIONS,
  TaskLifecycle,
  TaskTransitionError,
  type TaskRecord,
  type TaskState,
  type TaskStateEvent,
} from '../../../src/tasks/task-state.js';

const HAPPY_PATH: TaskState[] = ['pending', 'staging', 'provisioning', 'ready', 'running', 'completing', 'completed'];

function clock(start = Date.parse('2026-01-01T00:00:00Z')): () => Date {
  let t = start;
  return () => new Date((t += 1000));
}

/** A logger that keeps what the machine logs. */
function recordingLogger(): {
  info: (o: object, m?: string) => void;
  warn: (o: object, m?: string) => void;
  lines: { level: string; obj: Record<string, unknown>; msg: string }[];
} {
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  return {
    lines,
    info: (obj, msg) => lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg: msg ?? '' }),
    warn: (obj, msg) => lines.push({ level: 'warn', obj: obj as Record<string, unknown>, msg: msg ?? '' }),
  };
}

describe('task states', () => {
  test('the spec’s ten states, the same set the metrics pre-initialise', () => {
    assert.deepEqual([...TASK_STATES], [...TASK_STATE_LABELS]);
  });

  test('the happy path is allowed in order, and only forward', () => {
    for (let i = 0; i + 1 < HAPPY_PATH.length; i++) {
      assert.ok(canTransition(HAPPY_PATH[i]!, HAPPY_PATH[i + 1]!));
      for (let j = 0; j < i; j++) assert.ok(!canTransition(HAPPY_PATH[i]!, HAPPY_PATH[j]!), `${HAPPY_PATH[i]} -> ${HAPPY_PATH[j]}`);
      for (let j = i + 2; j < HAPPY_PATH.length; j++)
        assert.ok(!canTransition(HAPPY_PATH[i]!, HAPPY_PATH[j]!), `no skipping ${HAPPY_PATH[i]} -> ${HAPPY_PATH[j]}`);
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
    for (const from of TASK_STATES)
      for (const to of TASK_TRANSITIONS[from]) assert.ok(TASK_TRANSITION_TRIGGERS[from]?.[to], `${from} -> ${to}`);
    const md = transitionTableMarkdown(TASK_TRANSITIONS, TASK_TRANSITION_TRIGGERS);
    assert.match(md, /\| running \| failed_preserved \| the same, with failure_action preserve/u);
  });

  test('ids are task-<uuid>', () => {
    const id = newTaskId();
    assert.match(id, TASK_ID_RE);
    assert.notEqual(newTaskId(), id);
  });
});

describe('TaskLifecycle (on the core StateMachine)', () => {
  const destroy = { emit: (): void => undefined, failureAction: 'destroy' as const };

  test('walks the happy path recording message, times, started_at and one event per move', () => {
    const events: TaskStateEvent[] = [];
    const now = clock();
    const life = new TaskLifecycle(newTaskRecord('task-1', 'demo', now()), { emit: (e) => events.push(e), failureAction: 'destroy', now });
    for (const to of HAPPY_PATH.slice(1)) life.transition(to, `entered ${to}`);
    const task = life.record;
    assert.deepEqual(
      events.map((e) => [e.from, e.to]),
      HAPPY_PATH.slice(0, -1).map((from, i) => [from, HAPPY_PATH[i + 1]]),
    );
    assert.equal(task.state, 'completed');
    assert.equal(life.state, 'completed');
    assert.equal(task.state_message, 'entered completed');
    assert.equal(task.state_changed_at, events.at(-1)?.at);
    assert.equal(task.started_at, events.find((e) => e.to === 'running')?.at, 'started_at is when the agent started');
    assert.ok(Date.parse(task.state_changed_at) > Date.parse(task.created_at));
    assert.equal(task.error, null);
    assert.equal(life.counts().moves.get('running->completing'), 1);
  });

  test('every move is logged by the machine with its cause and message; a forbidden one at warn', () => {
    const logger = recordingLogger();
    const life = new TaskLifecycle(newTaskRecord('task-1', 'demo', new Date()), { ...destroy, logger });
    life.transition('staging', 'cloning x');
    assert.throws(() => life.transition('running', 'skip'), TaskTransitionError);
    assert.deepEqual(
      logger.lines.map((l) => [l.level, l.msg, l.obj['task'], l.obj['from'], l.obj['to'], l.obj['cause'], l.obj['message']]),
      [
        ['info', 'task: pending -> staging', 'task-1', 'pending', 'staging', 'picked_up', 'cloning x'],
        ['warn', 'task: transition not allowed', 'task-1', 'staging', 'running', 'command_started', 'skip'],
      ],
    );
    assert.equal(life.counts().rejected, 1);
  });

  test('illegal moves throw and change nothing', () => {
    const emitted: unknown[] = [];
    const life = new TaskLifecycle(newTaskRecord('task-1', 'demo', new Date()), { emit: (e) => emitted.push(e), failureAction: 'destroy' });
    const before = structuredClone(life.record);
    assert.throws(() => life.transition('running', 'skip'), TaskTransitionError);
    assert.throws(() => life.transition('pending', 'same'), TaskTransitionError);
    assert.deepEqual(life.record, before);
    assert.deepEqual(emitted, []);
  });

  test('failed_preserved needs failure_action preserve', () => {
    const running = (): TaskRecord => ({ ...newTaskRecord('task-1', 'demo', new Date()), state: 'running' });
    assert.throws(() => new TaskLifecycle(running(), destroy).transition('failed_preserved', 'x'), /failure_action: preserve/u);
    const life = new TaskLifecycle(running(), { ...destroy, failureAction: 'preserve' });
    life.transition('failed_preserved', 'exit 3', { exitCode: 3 });
    assert.equal(life.record.state, 'failed_preserved');
    assert.equal(life.record.exit_code, 3);
    assert.equal(life.record.error, 'exit 3', 'error defaults to the message on failure');
  });

  test('failureStateFor picks preservation only where it is allowed', () => {
    assert.equal(failureStateFor('running', 'preserve'), 'failed_preserved');
    assert.equal(failureStateFor('completing', 'preserve'), 'failed_preserved');
    assert.equal(failureStateFor('staging', 'preserve'), 'failed');
    assert.equal(failureStateFor('running', 'destroy'), 'failed');
  });

  test('tryTransition refuses quietly when the task moved on (a step finishing after a cancel), counted as skipped', () => {
    const life = new TaskLifecycle(newTaskRecord('task-1', 'demo', new Date()), destroy);
    life.transition('staging', 'cloning');
    life.transition('cancelled', 'cancelled: user');
    assert.equal(life.tryTransition(['staging'], 'provisioning', 'cloned'), false);
    assert.equal(life.record.state, 'cancelled');
    assert.equal(life.counts().skipped, 1);
  });

  test('long messages are clipped', () => {
    const life = new TaskLifecycle(newTaskRecord('task-1', 'demo', new Date()), destroy);
    life.transition('failed', 'x'.repeat(5000));
    assert.equal(life.record.state_message.length, 1024);
    assert.equal(life.record.error?.length, 1024);
  });

  test('property: any sequence of attempted moves keeps the record consistent with the table', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...TASK_STATES), { maxLength: 20 }),
        fc.constantFrom('destroy', 'preserve' as const),
        (targets, action) => {
          const events: TaskStateEvent[] = [];
          const life = new TaskLifecycle(newTaskRecord('task-1', 'demo', new Date()), {
            emit: (e) => events.push(e),
            failureAction: action,
          });
          for (const to of targets) {
            const from = life.state;
            const legal = canTransition(from, to) && (to !== 'failed_preserved' || action === 'preserve');
            try {
              life.transition(to, 'm');
              assert.ok(legal, `${from} -> ${to} went through`);
            } catch (err) {
              assert.ok(err instanceof TaskTransitionError && !legal, `${from} -> ${to}`);
              assert.equal(life.record.state, from);
            }
            assert.equal(life.record.state, life.state, 'record and machine agree');
          }
          // Events chain: each starts where the previous ended; at most one terminal state, last.
          events.forEach((e, i) => assert.equal(e.from, i === 0 ? 'pending' : events[i - 1]!.to));
          assert.ok(events.slice(0, -1).every((e) => !isTerminal(e.to)));
        },
      ),
    );
  });
});
