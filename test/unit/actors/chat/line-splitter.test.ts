import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { LineSplitter, type Line } from '../../../../actors/chat/line-splitter.js';

const enc = new TextEncoder();

function split(splitter: LineSplitter, pieces: Uint8Array[]): Line[] {
  const out: Line[] = [];
  for (const p of pieces) splitter.push(p, (l) => out.push(l));
  splitter.end((l) => out.push(l));
  return out;
}

void describe('LineSplitter', () => {
  void test('reassembles lines across chunks and numbers every line', () => {
    const out = split(new LineSplitter(), [enc.encode('ab'), enc.encode('c\n\nd'), enc.encode('e\r\nf')]);
    assert.deepEqual(
      out.map((l) => [l.line, l.text, l.partial]),
      [
        [1, 'abc', false],
        [2, '', false],
        [3, 'de', false],
        [4, 'f', true],
      ],
    );
  });

  void test('fast-check: any chunking of UTF-8 lines yields the same lines', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.string({ unit: 'grapheme', maxLength: 30 }).map((s) => s.replace(/[\r\n]/g, '')),
          { maxLength: 20 },
        ),
        fc.array(fc.nat(1000), { maxLength: 30 }),
        (texts, cuts) => {
          const bytes = enc.encode(texts.map((t) => `${t}\n`).join(''));
          const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
          const pieces: Uint8Array[] = [];
          let at = 0;
          for (const p of [...points, bytes.byteLength]) {
            pieces.push(bytes.slice(at, p));
            at = p;
          }
          assert.deepEqual(
            split(new LineSplitter(), pieces).map((l) => l.text),
            texts,
          );
        },
      ),
    );
  });

  void test('an over-long line keeps its start, cut at a character boundary, and the next line is intact', () => {
    for (const chunkBytes of [1, 7, 4096]) {
      const s = new LineSplitter(10);
      const bytes = enc.encode('ab€€€€€€€€\nok\n'); // € is 3 bytes: the cap falls inside the 3rd €
      const pieces: Uint8Array[] = [];
      for (let i = 0; i < bytes.byteLength; i += chunkBytes) pieces.push(bytes.subarray(i, i + chunkBytes));
      const out = split(s, pieces);
      assert.deepEqual(
        out.map((l) => [l.text, l.truncated, l.byteLength]),
        [
          ['ab€€', true, 26],
          ['ok', false, 2],
        ],
        `chunks of ${chunkBytes}`,
      );
    }
  });

  void test('rejects a nonsense cap', () => {
    assert.throws(() => new LineSplitter(0), RangeError);
  });
});
