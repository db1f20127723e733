import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { CommandResultFrame } from '../../../actors/protocol/agent-frames.js';
import type { CommandHandlers, RunningCommand, StartArgs } from '../../../src/agent-link/command-client.js';
import { runAgentCommand, type AgentRunOptions, type CommandStarter } from '../../../src/tasks/agent-run.js';

// The code under test unref's its timers (they must never keep a server alive); here nothing
// else would hold the event loop open while they run.
let keepAlive: NodeJS.Timeout;
before(() => {
  keepAlive = setInterval(() => undefined, 1000);
});
after(() => clearInterval(keepAlive));

function result(exit: number, extra: Partial<CommandResultFrame> = {}): CommandResultFrame {
  return {
    agent_id: 'a',
    command_id: 'c',
    exit_code: exit,
    error: '',
    duration_ms: 1,
    success: exit === 0,
    timed_out_by: '',
    last_seq: 0,
    result: 'success',
    ...extra,
  };
}

/** A starter whose command ends when `onSignal` says so. */
function starter(behave: {
  onSignal?: (n: number) => CommandResultFrame | null;
  output?: (h: CommandHandlers) => void;
  end?: CommandResultFrame;
}): CommandStarter & { signals: number[]; args: StartArgs[] } {
  const signals: number[] = [];
  const args: StartArgs[] = [];
  return {
    signals,
    args,
    start(_agentId: string, a: StartArgs, handlers: CommandHandlers = {}): Promise<RunningCommand> {
      args.push(a);
      let resolve!: (r: CommandResultFrame) => void;
      const p = new Promise<CommandResultFrame>((r) => (resolve = r));
      setImmediate(() => {
        behave.output?.(handlers);
        if (behave.end !== undefined) resolve(behave.end);
      });
      return Promise.resolve({
        agentId: 'a',
        commandId: a.commandId ?? 'c',
        result: p,
        signal: (n) => {
          signals.push(n);
          const r = behave.onSignal?.(n) ?? null;
          if (r !== null) resolve(r);
          return Promise.resolve();
        },
        stdin: () => Promise.resolve(),
        resize: () => Promise.resolve(),
        detach: () => undefined,
      });
    },
  };
}

const base = (signal: AbortSignal, out: Array<[string, string]> = []): AgentRunOptions => ({
  agentId: 'agent-1',
  commandId: 'task-1',
  argv: ['claude', '-p', 'hi'],
  cwd: '/w',
  env: { A: '1' },
  timeoutSeconds: 60,
  signal,
  killGraceMs: 30,
  onOutput: (s, d) => out.push([s, d.toString()]),
  onGap: () => undefined,
});

describe('runAgentCommand', () => {
  test('starts argv without a shell, maps the agent log stream to stderr, resolves with the result', async () => {
    const s = starter({
      end: result(0),
      output: (h) => {
        h.output?.('stdout', Buffer.from('o'), 1);
        h.output?.('log', Buffer.from('note'), 2);
      },
    });
    const out: Array<[string, string]> = [];
    const r = await runAgentCommand(s, base(new AbortController().signal, out));
    assert.deepEqual(r, { exitCode: 0, error: '', timedOutBy: '', killed: false, resultReceived: true });
    assert.deepEqual(s.args[0], {
      commandId: 'task-1',
      command: 'claude',
      args: ['-p', 'hi'],
      workingDir: '/w',
      env: { A: '1' },
      timeoutSeconds: 60,
    });
    assert.deepEqual(out, [
      ['stdout', 'o'],
      ['stderr', 'note'],
    ]);
  });

  test('an abort sends SIGTERM; a command that ignores it gets SIGKILL after the grace', async () => {
    const polite = starter({ onSignal: (n) => (n === 15 ? result(143) : null) });
    const ac = new AbortController();
    const p = runAgentCommand(polite, base(ac.signal));
    setTimeout(() => ac.abort(), 20);
    assert.deepEqual(await p, { exitCode: 143, error: '', timedOutBy: '', killed: true, resultReceived: true });
    assert.deepEqual(polite.signals, [15]);

    const stubborn = starter({ onSignal: (n) => (n === 9 ? result(137) : null) });
    const r = await runAgentCommand(stubborn, base(AbortSignal.abort()));
    assert.equal(r.exitCode, 137);
    assert.deepEqual(stubborn.signals, [15, 9]);
  });

  test('an agent that refuses the start rejects', async () => {
    const refusing: CommandStarter = { start: () => Promise.reject(new Error('agent gone')) };
    await assert.rejects(runAgentCommand(refusing, base(new AbortController().signal)), /agent gone/);
  });
});
