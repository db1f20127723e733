/**
 * The guarded transition helper: moves the table allows happen, are counted, logged and handed
 * to onTransition; a guard that does not match is a quiet skip; a move the table forbids is
 * refused, counted and logged.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { StateMachine, transitionTableMarkdown, type Transition, type TransitionTable } from '../../../src/core/state-machine.js';

type Light = 'red' | 'green' | 'yellow';
const TABLE: TransitionTable<Light> = { red: ['green'], green: ['yellow'], yellow: ['red'] };

function machine(): { m: StateMachine<Light>; moves: Transition<Light>[]; logs: { level: string; obj: Record<string, unknown> }[] } {
  const moves: Transition<Light>[] = [];
  const logs: { level: string; obj: Record<string, unknown> }[] = [];
  const m = new StateMachine<Light>({
    name: 'light',
    initial: 'red',
    table: TABLE,
    now: () => 42,
    logFields: { junction: 'j1' },
    logger: {
      info: (obj) => logs.push({ level: 'info', obj: obj as Record<string, unknown> }),
      warn: (obj) => logs.push({ level: 'warn', obj: obj as Record<string, unknown> }),
    },
    onTransition: (t) => moves.push(t),
  });
  return { m, moves, logs };
}

void describe('StateMachine', () => {
  void test('an allowed move changes the state, is counted, logged with the bound fields, and reported', () => {
    const { m, moves, logs } = machine();
    assert.equal(m.transition(['red'], 'green', 'timer'), true);
    assert.equal(m.state, 'green');
    assert.deepEqual(moves, [{ from: 'red', to: 'green', cause: 'timer', atMs: 42 }]);
    assert.deepEqual(logs[0], { level: 'info', obj: { junction: 'j1', machine: 'light', from: 'red', to: 'green', cause: 'timer' } });
    assert.equal(m.counts().moves.get('red->green'), 1);
  });

  void test('a guard that does not match is skipped quietly; moving to the current state is a no-op', () => {
    const { m, moves, logs } = machine();
    assert.equal(m.transition(['green', 'yellow'], 'green', 'x'), false);
    assert.equal(m.transition(['red'], 'red', 'x'), false);
    assert.equal(m.state, 'red');
    assert.equal(m.counts().skipped, 1);
    assert.equal(moves.length + logs.length, 0);
  });

  void test('a move the table forbids is refused, counted and logged at warn', () => {
    const { m, moves, logs } = machine();
    assert.equal(m.canMoveTo('yellow'), false);
    assert.equal(m.transition(['red'], 'yellow', 'bug'), false);
    assert.equal(m.state, 'red');
    assert.equal(m.counts().rejected, 1);
    assert.equal(moves.length, 0);
    assert.equal(logs[0]?.level, 'warn');
  });

  void test('the Markdown table lists every allowed move with its trigger', () => {
    const md = transitionTableMarkdown(TABLE, { red: { green: 'timer' } });
    assert.deepEqual(md.split('\n'), [
      '| From | To | Trigger |',
      '|---|---|---|',
      '| red | green | timer |',
      '| green | yellow |  |',
      '| yellow | red |  |',
    ]);
  });
});
