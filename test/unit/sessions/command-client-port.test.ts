/**
 * CommandClientPort: the PTY command it hands to the agents' command client, with a join's cwd
 * and env as working_dir and env (the guest agent applies them: guest-agent/commands.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StartArgs } from '../../../src/agent-link/command-client.js';
import { CommandClientPort } from '../../../src/sessions/command-client-port.js';

function portWith(started: StartArgs[]): CommandClientPort {
  return new CommandClientPort({
    client: {
      start: (_agentId, args) => {
        started.push(args);
        return Promise.resolve({
          agentId: 'a1',
          commandId: args.commandId ?? '',
          result: new Promise(() => undefined),
          signal: () => Promise.resolve(),
          stdin: () => Promise.resolve(),
          resize: () => Promise.resolve(),
          detach: () => undefined,
        });
      },
    },
    actors: { call: () => Promise.resolve(undefined as never) },
    connected: () => true,
  });
}

const pty = {
  commandId: 'c1',
  sessionId: 's1',
  sessionName: 'terminal-1',
  argv: ['/bin/sh', '-c', 'exec "$@"', 'x', 'top'],
  cols: 100,
  rows: 30,
  term: 'xterm-256color',
  timeoutSeconds: 0 as const,
};

void describe('CommandClientPort.startPty', () => {
  void test('sends allocate_pty with the size, session ids, working_dir and env of the request', async () => {
    const started: StartArgs[] = [];
    await portWith(started).startPty('a1', { ...pty, workingDir: 'proj', env: { A: 'b' } });
    assert.deepEqual(started[0], {
      commandId: 'c1',
      command: '/bin/sh',
      args: ['-c', 'exec "$@"', 'x', 'top'],
      allocatePty: true,
      ptyCols: 100,
      ptyRows: 30,
      ptyTerm: 'xterm-256color',
      sessionId: 's1',
      sessionName: 'terminal-1',
      timeoutSeconds: 0,
      workingDir: 'proj',
      env: { A: 'b' },
    });
  });

  void test('without them, neither field is sent (the agent uses its work directory and environment)', async () => {
    const started: StartArgs[] = [];
    await portWith(started).startPty('a1', pty);
    assert.equal('workingDir' in (started[0] ?? {}), false);
    assert.equal('env' in (started[0] ?? {}), false);
  });
});
