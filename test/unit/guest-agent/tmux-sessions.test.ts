import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TmuxSessionBackend, type ArgvRunner } from '../../../src/guest-agent/tmux-sessions.js';
import { managedTmuxTarget } from '../../../src/guest-agent/tmux-target.js';
import { tmuxAttachArgv, tmuxCreateArgv } from '../../../src/core/tmux-argv.js';

void describe('managedTmuxTarget', () => {
  test('finds the session of a create or attach argv of the managed server, nothing else', () => {
    const [c, ...a] = tmuxCreateArgv({ sessionName: 'term-1', command: 'bash', cols: 80, rows: 24 });
    assert.equal(managedTmuxTarget(c!, a), 'term-1');
    const [c2, ...a2] = tmuxAttachArgv({ sessionName: 'term-2' });
    assert.equal(managedTmuxTarget(c2!, a2), 'term-2');
    assert.equal(managedTmuxTarget('tmux', ['-L', 'other', 'new-session', '-s', 'x']), undefined);
    assert.equal(managedTmuxTarget('bash', ['-c', 'tmux -L sandboxd new-session -s x']), undefined);
    // A user command that mentions -s after `--` is not the session name.
    const [c3, ...a3] = tmuxCreateArgv({ sessionName: 'term-3', argv: ['sort', '-s', 'evil'], cols: 80, rows: 24 });
    assert.equal(managedTmuxTarget(c3!, a3), 'term-3');
  });
});

void describe('TmuxSessionBackend', () => {
  test('lists panes as tmux:<name>; no server is an empty list; kill runs the verified kill script', async () => {
    const calls: string[][] = [];
    let list = { exitCode: 0, stdout: '1700000000\t42\t80\t24\tterm-1\n1700000001\t43\t80\t24\trogue\n', stderr: '' };
    const run: ArgvRunner = (argv) => {
      calls.push([...argv]);
      return Promise.resolve(argv.includes('list-panes') ? list : { exitCode: 0, stdout: '', stderr: '' });
    };
    const b = new TmuxSessionBackend({ env: {}, run });
    const s = await b.list();
    assert.deepEqual(
      s.map((x) => [x.commandId, x.sessionName, x.pid, x.startedAtMs]),
      [
        ['tmux:term-1', 'term-1', 42, 1_700_000_000_000],
        ['tmux:rogue', 'rogue', 43, 1_700_000_001_000],
      ],
    );
    list = { exitCode: 1, stdout: '', stderr: 'no server running on /tmp/tmux-0/sandboxd' };
    assert.deepEqual(await b.list(), []);
    assert.equal(await b.kill('not-tmux', 1000), 'not_found');
    assert.equal(await b.kill('tmux:rogue', 2500), 'killed');
    const kill = calls.at(-1)!;
    assert.equal(kill[0], '/bin/sh');
    assert.deepEqual(kill.slice(-5), ['-L', 'sandboxd', 'rogue', 'TERM', '3']);
  });
});
