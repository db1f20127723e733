import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { CommandOutput } from '../../../src/guest-agent/command-output.js';
import { startPipeCommand } from '../../../src/guest-agent/command-runner.js';
import type { ChunkEntry } from '../../../src/guest-agent/output-buffer.js';
import type { CommandSpec } from '../../../src/guest-agent/running-command.js';
import { DEADLINE_MS, tail, waitFor } from '../../support/wait.js';
import { running } from './agent-test-helpers.js';

const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'agent-pipe-')));
after(() => rmSync(tmp, { recursive: true, force: true }));

function run(command: string, args: string[], extra: Partial<CommandSpec> = {}, drainAfterExitMs?: number) {
  const chunks: ChunkEntry[] = [];
  const out = new CommandOutput({ commandId: 'cmd-1', emit: (c) => chunks.push(c) });
  const s: CommandSpec = { commandId: 'cmd-1', command, args, cwd: tmp, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, ...extra };
  const command_ = startPipeCommand(s, out, drainAfterExitMs);
  const text = (stream: ChunkEntry['stream']): string =>
    Buffer.concat(chunks.filter((c) => c.stream === stream).map((c) => c.data)).toString();
  return { command: command_, chunks, text };
}

describe('pipe command runner', () => {
  test('runs without a shell: arguments arrive verbatim', async () => {
    const r = run('printf', ['%s|', 'a b', '$HOME', '*', "'q'"]);
    assert.equal((await r.command.exited).exitCode, 0);
    assert.equal(r.text('stdout'), "a b|$HOME|*|'q'|");
  });

  test('exit codes, and 128 + signal when a signal ends it', async () => {
    assert.equal((await run('sh', ['-c', 'exit 7']).command.exited).exitCode, 7);
    const killed = await run('sh', ['-c', 'kill -KILL $$']).command.exited;
    assert.deepEqual([killed.exitCode, killed.signal], [137, 'SIGKILL']);
  });

  test('stdout and stderr are separate streams with one seq counter, each ending in eof', async () => {
    const r = run('sh', ['-c', 'echo out; echo err >&2']);
    await r.command.exited;
    assert.equal(r.text('stdout'), 'out\n');
    assert.equal(r.text('stderr'), 'err\n');
    assert.deepEqual(
      r.chunks.map((c) => c.seq),
      r.chunks.map((_, i) => i + 1),
    );
    for (const s of ['stdout', 'stderr'] as const) {
      const mine = r.chunks.filter((c) => c.stream === s);
      assert.equal(mine.at(-1)?.eof, true, `${s} ends with eof`);
      assert.equal(mine.filter((c) => c.eof).length, 1);
    }
  });

  test('a program that cannot start reports -1 with the reason', async () => {
    const exit = await run('/nonexistent/program', []).command.exited;
    assert.equal(exit.exitCode, -1);
    assert.match(exit.error, /ENOENT/);
  });

  test('stdin is delivered and eof closes it', async () => {
    const r = run('cat', []);
    r.command.writeStdin(Buffer.from('line one\n'), false);
    r.command.writeStdin(Buffer.from('line two\n'), true);
    assert.equal((await r.command.exited).exitCode, 0);
    assert.equal(r.text('stdout'), 'line one\nline two\n');
  });

  test('cwd and env are applied', async () => {
    const r = run('sh', ['-c', 'pwd; echo "$GREETING"'], { env: { PATH: process.env.PATH ?? '', GREETING: 'hi there' } });
    await r.command.exited;
    assert.equal(r.text('stdout'), `${tmp}\nhi there\n`);
  });

  test('the command leads its own process group; terminate kills the grandchildren too', async () => {
    const r = run('sh', ['-c', 'sleep 1000 & echo "child=$!"; sleep 1000']);
    await waitFor("the background child's pid", () => /child=\d+/.test(r.text('stdout')), {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => `stdout ${tail(r.text('stdout'))}`,
    });
    const child = Number(/child=(\d+)/.exec(r.text('stdout'))?.[1]);
    assert.equal(running(child), true);
    await r.command.terminate(2000);
    const exit = await r.command.exited;
    assert.equal(exit.exitCode, 128 + 15);
    await waitFor(`the grandchild (pid ${child}) to be gone`, () => !running(child), { deadlineMs: DEADLINE_MS.process });
  });

  test('output of a background process holding the pipes stops counting shortly after the leader exits', async () => {
    const r = run('sh', ['-c', 'echo started; sleep 30 & echo "bg=$!"'], {}, 300);
    const t0 = Date.now();
    const exit = await r.command.exited;
    assert.equal(exit.exitCode, 0);
    assert.ok(Date.now() - t0 < 5000, 'the result does not wait for the background process');
    assert.match(r.text('stdout'), /^started\nbg=\d+\n$/);
    const bg = Number(/bg=(\d+)/.exec(r.text('stdout'))?.[1]);
    process.kill(bg, 'SIGKILL');
  });
});
