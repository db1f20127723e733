/**
 * The live `text` field written straight into frames (actors/protocol/live-text.ts) is byte for
 * byte JSON.stringify of what the reference decoder (LiveOutputEncoder, stream-text.ts rules)
 * decodes, for any bytes cut into any chunks: valid UTF-8, characters split across chunks,
 * invalid sequences, control characters, BOMs, offset jumps and eof.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { incompleteTail, LiveText, maxJsonTextBytes, writeJsonUtf8 } from '../../../../actors/protocol/live-text.js';
import { LiveOutputEncoder } from '../../../support/reference-output-event.js';

interface Piece {
  bytes: Uint8Array;
  offset: number;
  eof: boolean;
}

/** Cuts `bytes` at `cuts` into pieces with running offsets; `jumps` skip ahead (a gap) before some pieces. */
function pieces(bytes: Uint8Array, cuts: number[], jumps: Set<number> = new Set(), eof = false): Piece[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const out: Piece[] = [];
  let at = 0;
  let skew = 0;
  for (const p of [...points, bytes.byteLength]) {
    if (jumps.has(out.length)) skew += 7;
    out.push({ bytes: bytes.slice(at, p), offset: at + skew, eof: false });
    at = p;
  }
  if (eof && out.length > 0) out[out.length - 1]!.eof = true;
  return out;
}

/** The JSON literals the fast writer produces and the reference ones. */
function both(ps: Piece[]): { mine: string[]; reference: string[] } {
  const live = new LiveText();
  const ref = new LiveOutputEncoder('a', 'c');
  const out = Buffer.alloc(1 << 16);
  const mine: string[] = [];
  const reference: string[] = [];
  // Each chunk is handed over as a view of one reused Buffer (as a ring slot is), scribbled over afterwards.
  const slot = Buffer.alloc(4096);
  ps.forEach((p, i) => {
    slot.set(p.bytes);
    const end = live.write(out, 0, 'stdout', p.offset, slot.subarray(0, p.bytes.byteLength), p.eof);
    slot.fill(0x41);
    assert.ok(end <= maxJsonTextBytes(p.bytes.byteLength), 'within the size bound');
    mine.push(out.toString('utf8', 0, end));
    const ev = ref.next({
      kind: 'chunk',
      seq: i + 1,
      stream: 'stdout',
      offset: p.offset,
      timestampMs: 0,
      clock: i + 1,
      eof: p.eof,
      bytes: p.bytes,
    });
    reference.push(JSON.stringify(ev.text));
  });
  return { mine, reference };
}

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

void describe('live text', () => {
  void test('writeJsonUtf8 escapes exactly as JSON.stringify', () => {
    const all = Uint8Array.from({ length: 0x80 }, (_, i) => i);
    const out = Buffer.alloc(1024);
    const end = writeJsonUtf8(out, 0, all);
    assert.equal(out.toString('latin1', 0, end), JSON.stringify(String.fromCharCode(...all)));
    const text = 'price: € 😀 "quoted" \\ back\r\n\x1b[31mred\x1b[0m\u2028';
    const end2 = writeJsonUtf8(out, 0, utf8(text));
    assert.equal(out.toString('utf8', 0, end2), JSON.stringify(text));
  });

  void test('incompleteTail finds a cut character at the end', () => {
    assert.equal(incompleteTail(utf8('ab')), 0);
    assert.equal(incompleteTail(Uint8Array.from([0x61, 0xe2])), 1);
    assert.equal(incompleteTail(Uint8Array.from([0xe2, 0x82])), 2);
    assert.equal(incompleteTail(Uint8Array.from([0xe2, 0x82, 0xac])), 0);
    assert.equal(incompleteTail(Uint8Array.from([0xf0, 0x9f, 0x98])), 3);
    assert.equal(incompleteTail(Uint8Array.from([0x9f, 0x98, 0x80])), 0);
  });

  void test('a character split across chunks is whole in the chunk where it ends', () => {
    const { mine, reference } = both(pieces(utf8('€😀x'), [1, 2, 4, 6]));
    assert.deepEqual(mine, reference);
    assert.deepEqual(mine.map((j) => JSON.parse(j) as string).join(''), '€😀x');
  });

  void test('fast-check: valid UTF-8 text, any chunking, gaps and eof', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 200 }),
        fc.array(fc.nat(2000), { maxLength: 30 }),
        fc.array(fc.nat(30), { maxLength: 3 }),
        fc.boolean(),
        (s, cuts, jumps, eof) => {
          const { mine, reference } = both(pieces(utf8(`\ufeff${s}\x1b[0m\r\n`), cuts, new Set(jumps), eof));
          assert.deepEqual(mine, reference);
        },
      ),
      { numRuns: 300 },
    );
  });

  void test('fast-check: arbitrary (often invalid) bytes, any chunking', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 300 }),
        fc.array(fc.nat(400), { maxLength: 40 }),
        fc.array(fc.nat(40), { maxLength: 3 }),
        fc.boolean(),
        (bytes, cuts, jumps, eof) => {
          const { mine, reference } = both(pieces(bytes, cuts, new Set(jumps), eof));
          assert.deepEqual(mine, reference);
        },
      ),
      { numRuns: 400 },
    );
  });
});
