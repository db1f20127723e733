/**
 * The screen states' faster scroll of a region below the top row (actors/terminal/region-scroll.ts)
 * draws what xterm's own draws: the same output written to a changed and an unchanged terminal
 * leaves the same rows (text, colours, wrap flags, scrollback), cursor and viewport, whatever
 * regions, colours, wraps, reverse line feeds, screen switches and resizes come in between.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import xtermHeadless from '@xterm/headless';
import type { Terminal as TerminalType } from '@xterm/headless';
import { installRegionScroll } from '../../../actors/terminal/region-scroll.js';
import { screenOf, write } from './screens.js';

const { Terminal } = xtermHeadless;

function terminal(cols: number, rows: number, scrollback: number): TerminalType {
  return new Terminal({ cols, rows, scrollback, allowProposedApi: true });
}

/** Every row of the active buffer (scrollback too), with what screenOf sees of the visible part. */
function everything(term: TerminalType): unknown {
  const b = term.buffer.active;
  const rows: string[] = [];
  for (let y = 0; y < b.length; y++) {
    const line = b.getLine(y);
    rows.push(`${line?.isWrapped === true ? '+' : ' '}${line?.translateToString(false) ?? '?'}`);
  }
  return { rows, baseY: b.baseY, viewportY: b.viewportY, screen: screenOf(term) };
}

const text = fc.stringMatching(/^[a-z ]{0,90}$/);
const op = (rows: number, cols: number): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 6, arbitrary: text },
    { weight: 6, arbitrary: fc.constantFrom('\r\n', '\n', '\x1bD', '\x1bE') },
    { weight: 2, arbitrary: fc.constantFrom('\x1bM', '\x1b[2S', '\x1b[T', '\x1b[2J', '\x1b[K', '界界') },
    {
      weight: 3,
      arbitrary: fc
        .tuple(fc.integer({ min: 1, max: rows }), fc.integer({ min: 1, max: rows }))
        .map(([a, b]) => `\x1b[${Math.min(a, b)};${Math.max(a, b)}r`),
    },
    { weight: 2, arbitrary: fc.constantFrom('\x1b[r', '\x1b[41m', '\x1b[44;1m', '\x1b[0m', '\x1b[?6h', '\x1b[?6l') },
    {
      weight: 2,
      arbitrary: fc.tuple(fc.integer({ min: 1, max: rows }), fc.integer({ min: 1, max: cols })).map(([r, c]) => `\x1b[${r};${c}H`),
    },
    { weight: 1, arbitrary: fc.constantFrom('\x1b[?1049h', '\x1b[?1049l', 'resize') },
  );

describe('scrolling a region below the top row (region-scroll.ts)', () => {
  test('the pinned @xterm/headless is changed (its internals are the expected ones)', () => {
    assert.equal(installRegionScroll(terminal(20, 5, 0)), true);
  });

  test('a region fed lines leaves the same screen as xterm alone: status row kept, rows reused not shared', async () => {
    const fast = terminal(20, 6, 0);
    const plain = terminal(20, 6, 0);
    assert.ok(installRegionScroll(fast));
    const out = `status\x1b[2;6r\x1b[6;1H${Array.from({ length: 40 }, (_, i) => `\x1b[4${i % 8}mline ${i}\x1b[0m`).join('\r\n')}\r\n`;
    await write(fast, out);
    await write(plain, out);
    assert.deepEqual(everything(fast), everything(plain));
    const shown = screenOf(fast).lines;
    assert.deepEqual(shown, ['status', 'line 36', 'line 37', 'line 38', 'line 39', '']);
    // every row is its own object: writing one row leaves the others as they were
    await write(fast, '\x1b[2;1Hxx');
    await write(plain, '\x1b[2;1Hxx');
    assert.deepEqual(everything(fast), everything(plain));
  });

  test('any output: the same rows, colours, wraps, scrollback, cursor and viewport as xterm alone', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 4, max: 30 }),
        fc.integer({ min: 3, max: 10 }),
        fc.constantFrom(0, 4),
        fc.integer({ min: 3, max: 10 }).chain((rows) => fc.array(op(rows, 30), { minLength: 1, maxLength: 40 })),
        async (cols, rows, scrollback, ops) => {
          const fast = terminal(cols, rows, scrollback);
          const plain = terminal(cols, rows, scrollback);
          assert.ok(installRegionScroll(fast));
          for (const o of ops) {
            if (o === 'resize') {
              const [c, r] = [Math.max(2, cols - 3), rows + 1];
              fast.resize(c, r);
              plain.resize(c, r);
              continue;
            }
            await write(fast, o);
            await write(plain, o);
            assert.deepEqual(everything(fast), everything(plain), JSON.stringify(ops));
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
