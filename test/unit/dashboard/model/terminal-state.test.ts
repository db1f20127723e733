import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  initialTerminalState,
  membersText,
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
      { type: 'role_assigned', granted: 'observer', downgraded: true },
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
      { type: 'goodbye', reason: 'session_closed' },
      { type: 'socket_closed', code: 1000, reason: '' },
    ]);
    assert.equal(ended.phase, 'ended');
    assert.equal(terminalStatusText(ended), 'Ended: the session ended (exit code 0)');
    for (const code of [4400, 4401, 4403, 4404])
      assert.equal(run([{ type: 'socket_closed', code, reason: 'no' }]).phase, 'ended', String(code));
    for (const code of [1001, 1006, 1011, 4413, 4429])
      assert.equal(
        run([
          { type: 'role_assigned', granted: 'observer' },
          { type: 'socket_closed', code, reason: '' },
        ]).phase,
        'waiting',
        String(code),
      );
    // A server that says goodbye because it is stopping closes with 1000: not the end of the session.
    const shutdown = run([
      { type: 'role_assigned', granted: 'observer' },
      { type: 'goodbye', reason: 'server_shutdown' },
      { type: 'socket_closed', code: 1000, reason: '' },
    ]);
    assert.equal(shutdown.phase, 'waiting');
    assert.match(terminalStatusText(shutdown, 0, 1000), /the server said goodbye \(server shutdown\)/);
    const closed = run([{ type: 'user_closed' }, { type: 'socket_closed', code: 1006, reason: '' }]);
    assert.equal(closed.phase, 'closed');
  });

  test('a reconnect resumes from the last sequence the closed connection received', () => {
    assert.equal(replayFromOf(initialTerminalState()), undefined);
    let s = run([
      { type: 'role_assigned', granted: 'observer' },
      { type: 'socket_closed', code: 1006, reason: '', lastSequence: 41 },
      { type: 'connect', role: 'observer' },
    ]);
    assert.equal(replayFromOf(s), 41);
    // The next connection got nothing before it failed: its lastSequence is still 41.
    s = run([{ type: 'socket_closed', code: 1006, reason: '', lastSequence: 41 }], s);
    assert.equal(replayFromOf(s), 41);
    // Take control replaces a live connection: its position carries over.
    s = run([{ type: 'connect', role: 'controller', lastSequence: 57 }], s);
    assert.equal(replayFromOf(s), 57);
    // A replay gap reset the connection's cursor: the next join is a fresh one.
    s = run([{ type: 'socket_closed', code: 1006, reason: '', lastSequence: -1 }], s);
    assert.equal(replayFromOf(s), undefined);
  });

  test('membership: who controls and how many watch', () => {
    assert.equal(membersText(initialTerminalState()), '');
    assert.equal(membersText(run([{ type: 'membership', controllers: 1, observers: 1 }])), ' · 1 controller, 1 observer');
    assert.equal(membersText(run([{ type: 'membership', controllers: 0, observers: 3 }])), ' · no controller, 3 observers');
  });
});
