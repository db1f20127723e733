import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  initialTerminalState,
  isNewOutput,
  reduceTerminal,
  replayFromOf,
  terminalStatusText,
  type TerminalEvent,
  type TerminalState,
} from '../../../../src/dashboard/model/terminal-state.js';

const run = (events: TerminalEvent[], s: TerminalState = initialTerminalState()): TerminalState => events.reduce(reduceTerminal, s);

describe('dashboard terminal state', () => {
  test('joins as observer by default: read-only', () => {
    const s = run([{ type: 'role_assigned', granted: 'observer' }]);
    assert.equal(s.phase, 'attached');
    assert.equal(s.granted, 'observer');
    assert.equal(s.downgraded, false);
    assert.equal(terminalStatusText(s), 'Watching (read-only)');
  });

  test('take control granted, and refused (downgraded) with the reason shown', () => {
    const granted = run([
      { type: 'connect', role: 'controller' },
      { type: 'role_assigned', granted: 'controller' },
    ]);
    assert.equal(granted.granted, 'controller');
    assert.match(terminalStatusText(granted), /^Controlling/);
    const refused = run([
      { type: 'connect', role: 'controller' },
      { type: 'role_assigned', granted: 'observer', reason: 'lease_held' },
    ]);
    assert.equal(refused.downgraded, true);
    assert.equal(refused.granted, 'observer');
    assert.equal(terminalStatusText(refused), 'Watching — control refused: another client holds the controller lease');
    // Asking on the live connection (pty.request_role), then releasing.
    const live = run([
      { type: 'role_assigned', granted: 'observer' },
      { type: 'request_role', role: 'controller' },
      { type: 'role_assigned', granted: 'observer', requested: 'controller', reason: 'lease_held' },
    ]);
    assert.equal(live.downgraded, true);
    const released = run([
      { type: 'role_assigned', granted: 'controller', requested: 'controller' },
      { type: 'request_role', role: 'observer' },
      { type: 'role_assigned', granted: 'observer', requested: 'observer', reason: 'released' },
    ]);
    assert.equal(released.downgraded, false);
    assert.equal(terminalStatusText(released), 'Watching (read-only)');
  });

  test('an unexpected close waits to reconnect; the session ending or a refusal code does not', () => {
    const lost = run([
      { type: 'role_assigned', granted: 'observer' },
      { type: 'socket_closed', code: 1006, reason: '' },
    ]);
    assert.equal(lost.phase, 'waiting');
    assert.equal(lost.failures, 1);
    assert.match(terminalStatusText(lost, 0, 3000), /connection lost.*in 3s/);
    const ended = run([
      { type: 'role_assigned', granted: 'observer' },
      { type: 'exit', exitCode: 0 },
      { type: 'socket_closed', code: 1000, reason: '' },
    ]);
    assert.equal(ended.phase, 'ended');
    assert.equal(terminalStatusText(ended), 'Ended: the session ended (exit code 0)');
    const gone = run([{ type: 'socket_closed', code: 4404, reason: 'no such session' }]);
    assert.equal(gone.phase, 'ended');
    for (const code of [1001, 1006, 4408, 4413])
      assert.equal(
        run([
          { type: 'role_assigned', granted: 'observer' },
          { type: 'socket_closed', code, reason: '' },
        ]).phase,
        'waiting',
        String(code),
      );
    const closed = run([{ type: 'user_closed' }, { type: 'socket_closed', code: 1006, reason: '' }]);
    assert.equal(closed.phase, 'closed');
  });

  test('output already shown is skipped after a reconnect', () => {
    let s = run([{ type: 'role_assigned', granted: 'observer' }]);
    for (const seq of [1, 2, 3]) {
      assert.equal(isNewOutput(s, seq), true);
      s = reduceTerminal(s, { type: 'output', seq });
    }
    s = run(
      [
        { type: 'socket_closed', code: 1006, reason: '' },
        { type: 'connect', role: 'observer' },
        { type: 'role_assigned', granted: 'observer' },
      ],
      s,
    );
    assert.deepEqual(
      [1, 2, 3, 4].map((q) => isNewOutput(s, q)),
      [false, false, false, true],
    );
    assert.equal(isNewOutput(s, undefined), true);
    assert.equal(s.failures, 0);
    assert.equal(replayFromOf(s), 4);
    assert.equal(replayFromOf(initialTerminalState()), undefined);
    // The server could not resume there: it clears the screen and replays from seq 2.
    s = reduceTerminal(s, { type: 'replay_reset', fromSeq: 2 });
    assert.deepEqual(
      [1, 2, 3].map((q) => isNewOutput(s, q)),
      [false, true, true],
    );
  });
});
