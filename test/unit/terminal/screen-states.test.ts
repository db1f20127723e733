/**
 * The screen states as the session hub uses them, with the real worker: snapshots replay to the
 * screen a terminal fed the same output shows, describe exactly the calls made before them, and
 * the worker's end (stop, crash) rejects what was waiting without taking the process down.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { SNAPSHOT_FORMAT, startScreenStates, type ScreenStates } from '../../../actors/terminal/screen-states.js';
import { newTerminal, replay, screenOf, write } from './screens.js';

const utf8 = new TextEncoder();
const isSvc =
  (code: string) =>
  (err: unknown): boolean =>
    err instanceof SvcError && err.code === code;

async function withStates(fn: (states: ScreenStates) => Promise<void>, opts: Parameters<typeof startScreenStates>[0] = {}): Promise<void> {
  const states = startScreenStates(opts);
  try {
    await fn(states);
  } finally {
    await states.stop();
  }
}

const shell = [
  '\x1b[1;32muser@box\x1b[0m:\x1b[1;34m~\x1b[0m$ ls\r\n',
  '\x1b[01;34mbin\x1b[0m  \x1b[01;32mrun.sh\x1b[0m  notes.txt\r\n',
  '\x1b[1;32muser@box\x1b[0m:\x1b[1;34m~\x1b[0m$ clear\r\n\x1b[H\x1b[2J\x1b[3J',
  '\x1b[1;32muser@box\x1b[0m:\x1b[1;34m~\x1b[0m$ htop\r\n',
  '\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J\x1b[30;42m  PID USER      CPU%\x1b[K\x1b[m\r\n  101 root       3.0\r\n\x1b[7m F10 Quit \x1b[m',
];

void describe('startScreenStates', () => {
  void test('a snapshot of a shell running a full-screen program replays to the same screen and cursor', async () => {
    await withStates(async (states) => {
      const ref = newTerminal(100, 30);
      states.open('s1', 100, 30);
      for (const [i, chunk] of shell.entries()) {
        states.output('s1', i + 1, utf8.encode(chunk));
        await write(ref, chunk);
      }
      const snap = await states.snapshot('s1');
      assert.equal(snap.format, SNAPSHOT_FORMAT);
      assert.deepEqual([snap.cols, snap.rows, snap.anchorSequence], [100, 30, shell.length]);
      assert.ok(snap.data instanceof Uint8Array);
      const seen = screenOf(await replay(snap));
      assert.deepEqual(seen, screenOf(ref));
      assert.equal(seen.buffer, 'alternate');
      assert.match(seen.lines[0] ?? '', /PID USER/);
    });
  });

  void test('each snapshot holds exactly the calls made before it: anchorSequence names the last one', async () => {
    await withStates(async (states) => {
      states.open('s', 20, 4);
      const before = states.snapshot('s');
      states.output('s', 1, utf8.encode('one\r\n'));
      states.output('s', 2, utf8.encode('two\r\n'));
      const afterTwo = states.snapshot('s');
      states.output('s', 3, utf8.encode('three'));
      states.resize('s', 4, 30, 6);
      const afterResize = states.snapshot('s');
      states.output('s', 5, utf8.encode(' and four'));

      const blank = await before;
      assert.equal(blank.anchorSequence, 0);
      assert.deepEqual(screenOf(await replay(blank)).lines, ['', '', '', '']);
      const two = await afterTwo;
      assert.equal(two.anchorSequence, 2);
      assert.deepEqual(screenOf(await replay(two)).lines, ['one', 'two', '', '']);
      const resized = await afterResize;
      assert.deepEqual([resized.anchorSequence, resized.cols, resized.rows], [4, 30, 6]);
      assert.deepEqual(screenOf(await replay(resized)).lines.slice(0, 3), ['one', 'two', 'three']);
      assert.equal((await states.snapshot('s')).anchorSequence, 5);
    });
  });

  void test('chunks of one synchronous run, interleaved between sessions and past the batch size, land in order on each screen', async () => {
    await withStates(async (states) => {
      states.open('a', 30, 3);
      states.open('b', 30, 3);
      const filler = `${'x'.repeat(29)}\r\n`.repeat(1500); // 45 KB: more than one batch
      states.output('a', 1, utf8.encode('a1 '));
      states.output('b', 1, utf8.encode('b1 '));
      states.output('a', 2, utf8.encode('a2\r\n'));
      states.output('a', 3, utf8.encode(filler));
      states.output('a', 4, utf8.encode('a4 '));
      states.output('a', 5, utf8.encode('a5'));
      states.output('b', 2, utf8.encode('b2'));
      const [a, b] = await Promise.all([states.snapshot('a'), states.snapshot('b')]);
      assert.equal(a.anchorSequence, 5);
      assert.deepEqual(screenOf(await replay(a)).lines, ['x'.repeat(29), 'x'.repeat(29), 'a4 a5']);
      assert.equal(b.anchorSequence, 2);
      assert.deepEqual(screenOf(await replay(b)).lines, ['b1 b2', '', '']);
    });
  });

  void test('a resize reflows the screen as the terminal on the other end does', async () => {
    await withStates(async (states) => {
      const ref = newTerminal(40, 5);
      const long = `${'word '.repeat(14)}\r\n$ `;
      states.open('r', 40, 5);
      states.output('r', 1, utf8.encode(long));
      states.resize('r', 2, 25, 8);
      await write(ref, long);
      ref.resize(25, 8);
      const snap = await states.snapshot('r');
      assert.deepEqual([snap.cols, snap.rows], [25, 8]);
      assert.deepEqual(screenOf(await replay(snap)), screenOf(ref));
    });
  });

  void test('output data is copied: the caller may reuse its buffer at once, also when the chunk is a view into a bigger one', async () => {
    await withStates(async (states) => {
      states.open('c', 20, 2);
      const slab = new Uint8Array(4 << 20).fill(0x41);
      slab.set(utf8.encode('hello'), 1000);
      const chunk = slab.subarray(1000, 1005);
      states.output('c', 1, chunk);
      chunk.set(utf8.encode('XXXXX'));
      assert.equal(slab.byteLength, 4 << 20, 'the caller keeps its buffer');
      assert.deepEqual(screenOf(await replay(await states.snapshot('c'))).lines, ['hello', '']);
    });
  });

  void test('unknown and closed sessions reject session.not_found; open is idempotent; bad sizes throw RangeError', async () => {
    await withStates(async (states) => {
      await assert.rejects(states.snapshot('nobody'), isSvc('session.not_found'));
      states.open('o', 30, 3);
      states.output('o', 1, utf8.encode('kept'));
      states.open('o', 50, 9);
      const snap = await states.snapshot('o');
      assert.deepEqual([snap.cols, snap.rows], [30, 3]);
      assert.deepEqual(screenOf(await replay(snap)).lines, ['kept', '', '']);
      states.close('o');
      await assert.rejects(states.snapshot('o'), isSvc('session.not_found'));
      // a closed id can be opened again, blank
      states.open('o', 10, 2);
      assert.deepEqual(screenOf(await replay(await states.snapshot('o'))).lines, ['', '']);
      assert.throws(() => states.open('p', 0, 3), RangeError);
      assert.throws(() => states.resize('o', 2, 10, 1025), RangeError);
      assert.throws(() => states.open('p', 2.5, 3), RangeError);
      assert.deepEqual(states.stats(), { sessions: 1, pendingSnapshots: 0, restarts: 0, overruns: 0 });
    });
  });

  void test('stop() rejects pending snapshots with server.not_ready, is idempotent, and later calls are ignored or rejected', async () => {
    const states = startScreenStates();
    states.open('s', 80, 24);
    states.output('s', 1, utf8.encode('$ '));
    const pending = states.snapshot('s');
    const stopping = states.stop();
    assert.equal(states.stop(), stopping);
    await assert.rejects(pending, isSvc('server.not_ready'));
    await stopping;
    await assert.rejects(states.snapshot('s'), isSvc('server.not_ready'));
    states.open('t', 10, 10);
    states.output('s', 201, utf8.encode('ignored'));
    states.resize('s', 202, 10, 10);
    states.close('s');
    assert.equal(states.stats().sessions, 0);
  });

  void test('a worker that dies rejects pending snapshots with server.unavailable; the next one has the sessions back, unknown until redrawn', async () => {
    const errors: string[] = [];
    const logger = { warn: (): void => undefined, error: (_obj: object, msg?: string): number => errors.push(msg ?? '') };
    const workerUrl = new URL('./fixtures/crashing-screen.worker.js', import.meta.url);
    await withStates(
      async (states) => {
        states.open('a', 20, 3);
        states.open('crash', 20, 3);
        states.output('a', 1, utf8.encode('before the crash'));
        const first = states.snapshot('a');
        const second = states.snapshot('crash');
        assert.equal((await first).anchorSequence, 1);
        await assert.rejects(second, isSvc('server.unavailable'));
        assert.equal(states.stats().restarts, 1);
        assert.match(errors.join('\n'), /worker died/);
        // the replacement starts at once (it had run less than 10 s: after a short backoff)
        let stale: unknown;
        for (let i = 0; i < 100; i++) {
          stale = await states.snapshot('a').catch((err: unknown) => err);
          if (!isSvc('server.unavailable')(stale) || (stale as SvcError).details?.['reason'] === 'screen_not_known') break;
          await new Promise((r) => setTimeout(r, 20));
        }
        assert.ok(stale instanceof SvcError && stale.details?.['reason'] === 'screen_not_known', String(stale));
        states.output('a', 2, utf8.encode('\x1b[H\x1b[2Jredrawn'));
        const snap = await states.snapshot('a');
        assert.equal(snap.anchorSequence, 2);
        assert.deepEqual(screenOf(await replay(snap)).lines, ['redrawn', '', '']);
      },
      { workerUrl, logger },
    );
  });

  void test('the worker does not keep the process alive', async () => {
    const child = fileURLToPath(new URL('./fixtures/idle-exit.js', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [child], { timeout: 20_000 });
    assert.equal(stdout.trim(), '1 80x24');
  });
});
