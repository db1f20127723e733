/**
 * One session's screen, in-process (the worker only moves these calls to another thread): a
 * snapshot written to a fresh terminal shows what the emulator fed the same bytes shows, and the
 * bytes that follow the snapshot draw the same on both.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SvcError } from '../../../src/core/errors.js';
import { SessionScreen, type SessionScreenOptions } from '../../../actors/terminal/session-screen.js';
import { newTerminal, replay, screenOf, write } from './screens.js';
import type { Terminal } from '@xterm/headless';

const utf8 = new TextEncoder();

function screen(cols: number, rows: number, opts: Partial<SessionScreenOptions> = {}): SessionScreen {
  return new SessionScreen({ cols, rows, scrollback: 0, maxBacklogBytes: 1 << 20, stale: false, onOverrun: () => undefined, ...opts });
}

/** A session screen and a reference terminal fed the same output. */
class Pair {
  readonly screen: SessionScreen;
  readonly ref: Terminal;
  #seq = 0;
  constructor(cols: number, rows: number, opts: Partial<SessionScreenOptions> = {}) {
    this.screen = screen(cols, rows, opts);
    this.ref = newTerminal(cols, rows);
  }
  async out(text: string): Promise<void> {
    this.screen.output(++this.#seq, utf8.encode(text));
    await write(this.ref, text);
  }
  /** Snapshots, replays into a fresh terminal, checks it against the reference, returns it. */
  async replayed(): Promise<Terminal> {
    const snap = await this.screen.snapshot();
    assert.equal(snap.anchorSequence, this.#seq);
    const term = await replay({ data: snap.text, cols: snap.cols, rows: snap.rows });
    assert.deepEqual(screenOf(term), screenOf(this.ref));
    return term;
  }
}

/** The scroll region as `top;bottom` (1-based), read from xterm's internals as the snapshot does. */
function regionOf(term: Terminal): string {
  const buffer = (term as unknown as { _core: { _bufferService: { buffer: { scrollTop: number; scrollBottom: number } } } })._core
    ._bufferService.buffer;
  return `${buffer.scrollTop + 1};${buffer.scrollBottom + 1}`;
}

/** A wide character whose right half was overwritten (xterm allows it with wraparound off). */
function hasBrokenWideCharacter(term: Terminal): boolean {
  const b = term.buffer.active;
  for (let y = 0; y < term.rows; y++) {
    const line = b.getLine(b.viewportY + y);
    for (let x = 0; line !== undefined && x < term.cols; x++) {
      if (line.getCell(x)?.getWidth() === 2 && line.getCell(x + 1)?.getWidth() !== 0) return true;
    }
  }
  return false;
}

/** Writes `text` to both terminals and checks they still look the same. */
async function continueBoth(replayed: Terminal, ref: Terminal, text: string): Promise<void> {
  await write(replayed, text);
  await write(ref, text);
  assert.deepEqual(screenOf(replayed), screenOf(ref));
}

const prompt = '\x1b[1;32muser@box\x1b[0m:\x1b[1;34m~/src\x1b[0m$ ';

void describe('SessionScreen snapshots', () => {
  void test('a shell session (colours, cursor moves, clear) replays to the same screen, and what follows draws the same', async () => {
    const p = new Pair(80, 12);
    await p.out(`${prompt}ls --color\r\n\x1b[0m\x1b[01;34mbin\x1b[0m  \x1b[01;32mbuild.sh\x1b[0m  README.md  日本語.txt\r\n`);
    await p.out(`${prompt}clear\r\n\x1b[H\x1b[2J\x1b[3J${prompt}make\r\n`);
    for (let i = 0; i < 20; i++)
      await p.out(`\x1b[38;5;${i * 11}mcc -c file${i}.c\x1b[0m -o \x1b[38;2;200;${i * 10};40mfile${i}.o\x1b[0m\r\n`);
    // a progress line redrawn in place, then a half-written prompt with bold red still on
    await p.out('[####      ] 40%\r[########  ] 80%\x1b[K\r\n');
    await p.out(`${prompt}echo \x1b[5D\x1b[1C\x1b[4m\x1b[1;31mtyping`);
    const term = await p.replayed();
    await continueBoth(term, p.ref, ' still red\r\n\x1b[0mplain\r\n');
  });

  void test('a full-screen program on the alternate screen; on exit the shell screen and cursor come back', async () => {
    const p = new Pair(40, 10);
    await p.out(`${prompt}vi notes.txt`);
    // enter, clear blue, status line in a region, hidden cursor, app cursor keys, SGR mouse
    await p.out('\x1b[?1049h\x1b[?1h\x1b=\x1b[?1000h\x1b[?1006h\x1b[?25l\x1b[44m\x1b[H\x1b[2J');
    await p.out('\x1b[1;1H\x1b[1;37mline one\x1b[2;1Hline two\x1b[10;1H\x1b[7m-- INSERT --\x1b[27m\x1b[1;9r\x1b[9;1H');
    const term = await p.replayed();
    assert.deepEqual(term.modes, p.ref.modes);
    await continueBoth(term, p.ref, '\r\nscrolled in the region\r\nagain');
    await continueBoth(term, p.ref, '\x1b[0m\x1b[r\x1b[?25h\x1b[?1l\x1b>\x1b[?1000l\x1b[?1049l');
    assert.equal(screenOf(term).buffer, 'normal');
    await continueBoth(term, p.ref, '\r\n$ ');
  });

  void test('modes and character sets carry over: DEC line drawing, insert mode, bracketed paste, no wraparound', async () => {
    const p = new Pair(20, 4);
    await p.out('\x1b[?2004h\x1b[4h\x1b[?7l\x1b(0lqqk\r\nx  x');
    const term = await p.replayed();
    assert.deepEqual(term.modes, p.ref.modes);
    // still in line drawing: 'q' is a line; insert mode pushes the rest right; no wrap at the edge
    await continueBoth(term, p.ref, '\x1b[1;2Hqq\x1b[2;1H' + 'x'.repeat(30));
  });

  void test('a cursor left after the last column wraps the next character, as on the real terminal', async () => {
    const p = new Pair(10, 3);
    await p.out('0123456789');
    const term = await p.replayed();
    await continueBoth(term, p.ref, 'wrapped');
  });

  void test('rows a program erased in colour keep their colour', async () => {
    const p = new Pair(20, 6);
    await p.out('\x1b[44m\x1b[2J\x1b[H\x1b[1;33mmenu\x1b[0m\x1b[6;1H\x1b[41m\x1b[K\x1b[0m');
    await p.replayed();
  });

  void test('a resize is applied between the output before and after it', async () => {
    const s = screen(20, 5);
    const ref = newTerminal(20, 5);
    s.output(1, utf8.encode('a'.repeat(30)));
    s.resize(2, 10, 8);
    s.output(3, utf8.encode('\r\nafter'));
    const taken = s.snapshot();
    s.output(4, utf8.encode('\r\nnot in the snapshot'));
    await write(ref, 'a'.repeat(30));
    ref.resize(10, 8);
    await write(ref, '\r\nafter');
    const snap = await taken;
    assert.deepEqual([snap.cols, snap.rows, snap.anchorSequence], [10, 8, 3]);
    assert.deepEqual(screenOf(await replay({ data: snap.text, cols: snap.cols, rows: snap.rows })), screenOf(ref));
  });

  void test('random printable text, CSI sequences and modes: the replayed snapshot shows the same screen, and text after it lands the same', async () => {
    const piece = fc.oneof(
      fc.string({ unit: fc.constantFrom(...'abc XYZ-é日│'.split('')), maxLength: 30 }),
      fc.constantFrom(
        '\r\n',
        '\r',
        '\n',
        '\b',
        '\t',
        '\x1b[m',
        '\x1b[2J',
        '\x1b[K',
        '\x1b[1K',
        '\x1b7',
        '\x1b8',
        '\x1bM',
        '\x1bD',
        '\x1bE',
      ),
      // modes the snapshot carries
      fc.constantFrom(
        '\x1b[?1049h',
        '\x1b[?1049l',
        '\x1b[4h',
        '\x1b[4l',
        '\x1b[?6h',
        '\x1b[?6l',
        '\x1b[?7l',
        '\x1b[?7h',
        '\x1b(0',
        '\x1b(B',
      ),
      fc.constantFrom('\x1b[?25l', '\x1b[?25h', '\x1b[?2004h', '\x1b[?1h', '\x1b=', '\x1b[?1002h', '\x1b[?1006h', '\x1b[?1000l'),
      fc.constantFrom('\x1b[?1004h', '\x1b[?45h', '\x1b)0', '\x0e', '\x0f'),
      fc.tuple(fc.integer({ min: 0, max: 30 }), fc.constantFrom(...'ABCDGJKLMPSTX@d'.split(''))).map(([n, f]) => `\x1b[${n}${f}`),
      fc.tuple(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 30 })).map(([r, c]) => `\x1b[${r};${c}H`),
      fc.tuple(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 12 })).map(([t, b]) => `\x1b[${t};${b}r`),
      fc
        .array(fc.constantFrom(0, 1, 4, 7, 22, 24, 27, 31, 39, 42, 49, 95, 104), { minLength: 1, maxLength: 4 })
        .map((a) => `\x1b[${a.join(';')}m`),
      fc.integer({ min: 0, max: 255 }).map((n) => `\x1b[38;5;${n}m`),
      fc.integer({ min: 0, max: 0xffffff }).map((n) => `\x1b[48;2;${n >> 16};${(n >> 8) & 255};${n & 255}m`),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(piece, { maxLength: 40 }),
        fc.integer({ min: 2, max: 30 }),
        fc.integer({ min: 1, max: 12 }),
        async (pieces, cols, rows) => {
          const p = new Pair(cols, rows);
          await p.out(pieces.join(''));
          // not carried (README): a pending wrap while a scroll region or origin mode is set
          fc.pre(!(p.ref.buffer.active.cursorX >= cols && (regionOf(p.ref) !== `1;${rows}` || p.ref.modes.originMode)));
          // with wraparound off xterm lets a character overwrite half of a wide one: no bytes make that on a sane terminal
          fc.pre(!hasBrokenWideCharacter(p.ref));
          const term = await p.replayed();
          assert.deepEqual(term.modes, p.ref.modes);
          // plain text after it lands the same: SGR, insert mode, character set, wrapping, region
          await continueBoth(term, p.ref, 'Zq\r\nq日');
          p.screen.close();
        },
      ),
      { numRuns: Number(process.env['SCREEN_RUNS'] ?? 300) },
    );
  });
});

void describe('SessionScreen bounds and lifecycle', () => {
  void test('output faster than the emulator parses is dropped; snapshots are refused until the screen is redrawn', async () => {
    let overruns = 0;
    const p = new Pair(30, 5, { maxBacklogBytes: 64 * 1024, onOverrun: () => overruns++ });
    const flood = 'y\r\n'.repeat(20_000);
    // written without waiting: the backlog passes 64 KiB and the rest of the flood is dropped
    for (let i = 0; i < 8; i++) void p.out(flood);
    await p.out('');
    assert.equal(overruns, 1);
    assert.ok(p.screen.droppedBytes > 0);
    await assert.rejects(p.screen.snapshot(), (e) => e instanceof SvcError && e.code === 'server.unavailable');
    // a scrolling program: once two screens of lines have gone by, the screen is whole again
    for (let i = 0; i < 9; i++) await p.out(`line ${i}\r\n`);
    await assert.rejects(p.screen.snapshot(), (e) => e instanceof SvcError && e.details?.['reason'] === 'screen_not_known');
    await p.out('line 9\r\n$ ');
    await p.replayed();
  });

  void test('after an overrun, a program that clears the screen or enters the alternate screen is snapshotted again', async () => {
    const p = new Pair(30, 5, { maxBacklogBytes: 16 * 1024 });
    for (let i = 0; i < 8; i++) void p.out('z'.repeat(8 * 1024));
    await p.out('');
    await assert.rejects(p.screen.snapshot(), (e) => e instanceof SvcError && e.code === 'server.unavailable');
    await p.out('\x1b[?1049h\x1b[Htop - 10:00:00');
    await p.replayed();
    // back on the normal screen, which is not known
    await p.out('\x1b[?1049l');
    await assert.rejects(p.screen.snapshot(), (e) => e instanceof SvcError && e.code === 'server.unavailable');
    await p.out('\x1b[H\x1b[2J$ ');
    await p.replayed();
  });

  void test('a screen opened stale (worker replaced) refuses snapshots until redrawn', async () => {
    const s = screen(10, 3, { stale: true });
    await assert.rejects(s.snapshot(), (e) => e instanceof SvcError && e.code === 'server.unavailable');
    s.output(1, utf8.encode('\x1bcfresh'));
    const snap = await s.snapshot();
    assert.match(snap.text, /fresh/);
  });

  void test('close() rejects a snapshot still waiting for the output before it, and later ones', async () => {
    const s = screen(80, 24);
    s.output(1, utf8.encode('x'.repeat(1 << 20)));
    const waiting = s.snapshot();
    s.close();
    s.close();
    await assert.rejects(waiting, (e) => e instanceof SvcError && e.code === 'session.not_found');
    await assert.rejects(s.snapshot(), (e) => e instanceof SvcError && e.code === 'session.not_found');
  });
});
