import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { CommandOutput } from '../../../src/guest-agent/command-output.js';
import type { ChunkEntry } from '../../../src/guest-agent/output-buffer.js';
import { PTY_DEFAULTS, startPtyCommand } from '../../../src/guest-agent/pty-runner.js';
import type { CommandSpec } from '../../../src/guest-agent/running-command.js';
import { DEADLINE_MS, settled, tail, waitFor } from '../../support/wait.js';
import { running } from './agent-test-helpers.js';

const tmp = mkdtempSync(join(tmpdir(), 'agent-pty-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function spec(command: string, args: string[]): CommandSpec {
  return { commandId: 'pty-1', command, args, cwd: tmp, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: tmp } };
}

function run(command: string, args: string[], pty = PTY_DEFAULTS) {
  const chunks: ChunkEntry[] = [];
  const out = new CommandOutput({ commandId: 'pty-1', emit: (c) => chunks.push(c) });
  const started = startPtyCommand(spec(command, args), pty, out);
  const text = (): string => Buffer.concat(chunks.map((c) => c.data)).toString('utf8');
  return { ...started, chunks, text };
}

describe('PTY runner', () => {
  test('a program that writes 10 MiB and exits at once loses nothing (20 of 20 runs)', async () => {
    // base64 -w0: no newlines, so the terminal's \n → \r\n translation cannot change the bytes.
    const runs = 20;
    let bytesChecked = 0;
    for (let i = 0; i < runs; i++) {
      const file = join(tmp, `expected-${i}`);
      const r = run('bash', ['-c', `head -c 10485760 /dev/urandom | base64 -w0 | tee ${file}`]);
      assert.equal(r.tailDrainInstalled, true, 'the node-pty tail drain is installed');
      const exit = await r.command.exited;
      assert.equal(exit.exitCode, 0);
      const got = Buffer.concat(r.chunks.map((c) => c.data));
      const want = readFileSync(file);
      assert.equal(got.length, want.length, `run ${i}: ${want.length - got.length} bytes missing`);
      assert.equal(
        createHash('sha256').update(got).digest('hex'),
        createHash('sha256').update(want).digest('hex'),
        `run ${i}: sha256 differs`,
      );
      // The stream is well-formed: seqs 1..n, contiguous offsets, eof only on the last chunk.
      r.chunks.forEach((c, k) => {
        assert.equal(c.seq, k + 1);
        assert.equal(c.eof, k === r.chunks.length - 1);
        assert.ok(c.data.length <= 64 * 1024);
      });
      bytesChecked += want.length;
      rmSync(file);
    }
    assert.equal(bytesChecked, runs * 13_981_016);
  });

  test('raw mode output that ends at exit is complete too', async () => {
    for (let i = 0; i < 5; i++) {
      const file = join(tmp, `raw-${i}`);
      const r = run('bash', ['-c', `stty raw -echo; head -c 2097152 /dev/urandom | tee ${file}`]);
      await r.command.exited;
      const got = Buffer.concat(r.chunks.map((c) => c.data));
      assert.ok(got.equals(readFileSync(file)), `raw run ${i}: ${readFileSync(file).length - got.length} bytes differ`);
    }
  });

  test('exit status, and 128 + signal when a signal ends it', async () => {
    assert.equal((await run('bash', ['-c', 'exit 3']).command.exited).exitCode, 3);
    const killed = await run('bash', ['-c', 'kill -TERM $$']).command.exited;
    assert.equal(killed.exitCode, 128 + 15);
    assert.equal(killed.signal, 'SIGTERM');
  });

  test('terminal size and TERM come from the request, and resize reaches the program', async () => {
    const r = run('bash', ['--norc', '--noprofile', '-c', 'echo "term=$TERM size=$(stty size)"; read x; echo "after=$(stty size)"'], {
      cols: 100,
      rows: 30,
      term: 'xterm-256color',
    });
    await waitFor('the initial size', () => r.text().includes('size=30 100'), {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => `output ${tail(r.text())}`,
    });
    assert.match(r.text(), /term=xterm-256color/);
    assert.equal(r.command.resize(132, 43), true);
    r.command.writeStdin(Buffer.from('go\r'), false);
    await r.command.exited;
    assert.match(r.text(), /after=43 132/);
  });

  test('stdin reaches the program; eof sends ^D; a clean exit is not turned into SIGHUP', async () => {
    // cat closes its terminal fds in an atexit handler, just before exiting: closing the master
    // at that moment would SIGHUP it (exit 129). 20 runs.
    for (let i = 0; i < 20; i++) {
      const r = run('cat', []);
      r.command.writeStdin(Buffer.from('hello pty\n'), true);
      const exit = await r.command.exited;
      assert.equal(exit.exitCode, 0, `run ${i}: cat saw end of input and exited by itself`);
      assert.match(r.text(), /hello pty\r\nhello pty\r\n/, 'echo of the line, then cat printing it');
    }
  });

  test('a signal reaches the whole process group', async () => {
    const r = run('bash', ['-c', 'sleep 1000 & echo "child=$!"; wait']);
    await waitFor("the background child's pid", () => /child=\d+/.test(r.text()), {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => `output ${tail(r.text())}`,
    });
    const child = Number(/child=(\d+)/.exec(r.text())?.[1]);
    assert.equal(r.command.signal(2), true);
    const exit = await r.command.exited;
    assert.equal(exit.exitCode, 128 + 2);
    await waitFor(`the background child (pid ${child}) to be gone`, () => !running(child), { deadlineMs: DEADLINE_MS.process });
  });

  test('a signal sent right after start is not lost (before the child made its process group)', async () => {
    for (let i = 0; i < 50; i++) {
      const r = run('sleep', ['1000']);
      assert.equal(r.command.signal(9), true);
      const exit = await settled(`run ${i}: sleep to die of the SIGKILL sent right after start`, r.command.exited, {
        deadlineMs: DEADLINE_MS.local,
      }).catch((err: unknown) => {
        process.kill(r.command.pid, 'SIGKILL');
        throw err;
      });
      assert.equal(exit.exitCode, 137, `run ${i}`);
    }
  });

  test('terminate: SIGTERM, then SIGKILL after the grace for a program that ignores it', async () => {
    const r = run('bash', ['-c', "trap '' TERM; echo ready; sleep 1000"]);
    await waitFor('the trap to be installed', () => r.text().includes('ready'), {
      deadlineMs: DEADLINE_MS.process,
      lastState: () => `output ${tail(r.text())}`,
    });
    const t0 = Date.now();
    await r.command.terminate(300);
    const exit = await r.command.exited;
    assert.equal(exit.exitCode, 128 + 9);
    assert.ok(Date.now() - t0 >= 250, 'waited for the grace period');
  });

  test('writing after exit is ignored, not an error', async () => {
    const r = run('true', []);
    await r.command.exited;
    r.command.writeStdin(Buffer.from('late'), true);
    assert.equal(r.command.resize(90, 20), false);
  });
});
