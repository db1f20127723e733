import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ReplayBudget, waterLevel } from '../../../../actors/replay/replay-budget.js';
import {
  kEntryOverheadBytes,
  kSlabBytes,
  kSlabMinRingBytes,
  ReplayRing,
  type ChunkInput,
  type OutputStreamName,
} from '../../../../actors/replay/replay-ring.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Per-stream offsets are tracked like the agent does. */
function feeder(ring: ReplayRing) {
  const offsets: Record<OutputStreamName, number> = { stdout: 0, stderr: 0, log: 0 };
  let seq = 0;
  return {
    chunk(text: string, opts: { stream?: OutputStreamName; seq?: number; clock?: number } = {}): ChunkInput {
      const stream = opts.stream ?? 'stdout';
      const bytes = enc.encode(text);
      seq = opts.seq ?? seq + 1;
      const c: ChunkInput = { seq, stream, offset: offsets[stream], timestampMs: 1_000 + seq, bytes };
      if (opts.clock !== undefined) c.clock = opts.clock;
      offsets[stream] += bytes.byteLength;
      assert.equal(ring.append(c), 'stored');
      return c;
    },
    skipTo(next: number): void {
      seq = next - 1;
    },
  };
}

function texts(page: { chunks: Array<{ bytes: Uint8Array }> }): string[] {
  return page.chunks.map((c) => dec.decode(c.bytes));
}

void describe('ReplayRing', () => {
  void test('replays every chunk with its seq, stream, offset and exact bytes', () => {
    const ring = new ReplayRing('cmd-1');
    const f = feeder(ring);
    f.chunk('hello ');
    f.chunk('oops\n', { stream: 'stderr' });
    f.chunk('world\n');
    const page = ring.replayFrom(0, 100);
    assert.equal(page.gap, undefined);
    assert.deepEqual(
      page.chunks.map((c) => [c.seq, c.stream, c.offset, dec.decode(c.bytes)]),
      [
        [1, 'stdout', 0, 'hello '],
        [2, 'stderr', 0, 'oops\n'],
        [3, 'stdout', 6, 'world\n'],
      ],
    );
    assert.equal(page.more, false);
    assert.deepEqual(page.next, { clock: 3, seq: 3 });
  });

  void test('keeps its own copy of the bytes (the caller may reuse its buffer)', () => {
    const ring = new ReplayRing('cmd');
    const buf = enc.encode('abc');
    ring.append({ seq: 1, stream: 'stdout', offset: 0, timestampMs: 1, bytes: buf });
    buf.fill(0x7a);
    assert.deepEqual(texts(ring.replayFrom(0, 10)), ['abc']);
  });

  void test('pages by limit and resumes exactly after a seq', () => {
    const ring = new ReplayRing('cmd');
    const f = feeder(ring);
    for (let i = 1; i <= 10; i++) f.chunk(`line ${i}\n`);
    const p1 = ring.replayFrom(0, 4);
    assert.deepEqual(
      p1.chunks.map((c) => c.seq),
      [1, 2, 3, 4],
    );
    assert.equal(p1.more, true);
    const p2 = ring.replayFrom(p1.next.seq, 4);
    assert.deepEqual(
      p2.chunks.map((c) => c.seq),
      [5, 6, 7, 8],
    );
    const p3 = ring.replayFrom(7, 100);
    assert.deepEqual(
      p3.chunks.map((c) => c.seq),
      [8, 9, 10],
    );
    assert.equal(p3.more, false);
    assert.deepEqual(ring.replayFrom(10, 5).chunks, []);
  });

  void test('a stream filter passes over other streams but the limit counts matching chunks', () => {
    const ring = new ReplayRing('cmd');
    const f = feeder(ring);
    f.chunk('o1');
    f.chunk('e1', { stream: 'stderr' });
    f.chunk('e2', { stream: 'stderr' });
    f.chunk('o2');
    f.chunk('o3');
    const page = ring.replayFrom(0, 2, 'stdout');
    assert.deepEqual(texts(page), ['o1', 'o2']);
    assert.equal(page.next.seq, 4);
    assert.deepEqual(texts(ring.replayFrom(page.next.seq, 2, 'stdout')), ['o3']);
  });

  void test('ignores duplicates (agent resend) and rejects invalid seqs', () => {
    const ring = new ReplayRing('cmd');
    const f = feeder(ring);
    const c = f.chunk('a');
    assert.equal(ring.append(c), 'duplicate');
    assert.equal(ring.append({ ...c, seq: 0 }), 'invalid');
    assert.equal(ring.append({ ...c, seq: 1.5 }), 'invalid');
    assert.equal(ring.replayFrom(0, 10).chunks.length, 1);
  });

  void test('a seq jump is reported as an agent_dropped gap before the chunks after it', () => {
    const ring = new ReplayRing('cmd');
    const f = feeder(ring);
    f.chunk('a');
    f.chunk('b', { seq: 5 });
    f.chunk('c');
    const p1 = ring.replayFrom(0, 10);
    assert.deepEqual(texts(p1), ['a']);
    assert.equal(p1.more, true);
    const p2 = ring.replayFrom(p1.next.seq, 10);
    assert.deepEqual(p2.gap, { fromSeq: 2, toSeq: 4, reason: 'agent_dropped', clock: 5 });
    assert.deepEqual(texts(p2), ['b', 'c']);
    // resuming from inside the gap reports only the rest of it
    assert.deepEqual(ring.replayFrom(3, 10).gap, { fromSeq: 4, toSeq: 4, reason: 'agent_dropped', clock: 5 });
  });

  void test('an OutputGap from the agent is reported with its lost bytes', () => {
    const ring = new ReplayRing('cmd');
    const f = feeder(ring);
    f.chunk('a');
    assert.equal(ring.appendGap({ firstSeq: 2, lastSeq: 6, lostBytes: 4096, timestampMs: 5, clock: 6 }), 'stored');
    f.skipTo(7);
    f.chunk('z');
    assert.equal(ring.appendGap({ firstSeq: 3, lastSeq: 4, timestampMs: 5, clock: 99 }), 'duplicate');
    const page = ring.replayFrom(1, 10);
    assert.deepEqual(page.gap, { fromSeq: 2, toSeq: 6, reason: 'agent_dropped', lostBytes: 4096, clock: 6 });
    assert.deepEqual(texts(page), ['z']);
  });

  void test('evicts whole chunks oldest first at its byte limit and reports what it evicted', () => {
    const perChunk = 10 + kEntryOverheadBytes;
    const ring = new ReplayRing('cmd', { maxBytes: perChunk * 3 });
    const f = feeder(ring);
    for (let i = 0; i < 5; i++) f.chunk(`chunk-${i}...`.slice(0, 10));
    assert.equal(ring.bytes, perChunk * 3);
    assert.equal(ring.evictedThroughSeq, 2);
    const page = ring.replayFrom(0, 10);
    assert.deepEqual(page.gap, { fromSeq: 1, toSeq: 2, reason: 'evicted', clock: 2 });
    assert.deepEqual(
      page.chunks.map((c) => c.seq),
      [3, 4, 5],
    );
    // a subscriber that had seq 1 loses only seq 2
    assert.deepEqual(ring.replayFrom(1, 10).gap, { fromSeq: 2, toSeq: 2, reason: 'evicted', clock: 2 });
    assert.equal(ring.replayFrom(2, 10).gap, undefined);
  });

  void test('a chunk larger than the ring is accounted for and reported as evicted', () => {
    const ring = new ReplayRing('cmd', { maxBytes: 1000 });
    const f = feeder(ring);
    f.chunk('x'.repeat(2000));
    assert.equal(ring.bytes, 0);
    assert.equal(ring.lastSeq, 1);
    assert.deepEqual(ring.replayFrom(0, 10).gap, { fromSeq: 1, toSeq: 1, reason: 'evicted', clock: 1 });
  });

  void test('tail replay: the last N chunks, and the evicted part of them as a gap', () => {
    const perChunk = 1 + kEntryOverheadBytes;
    const ring = new ReplayRing('cmd', { maxBytes: perChunk * 4 });
    const f = feeder(ring);
    for (let i = 0; i < 10; i++) f.chunk(String(i));
    assert.equal(ring.tailAfterSeq(2), 8);
    assert.deepEqual(
      ring.replayFrom(ring.tailAfterSeq(2), 2).chunks.map((c) => c.seq),
      [9, 10],
    );
    // 6 wanted, 4 held: the 2 before them are reported gone
    const page = ring.replayFrom(ring.tailAfterSeq(6), 6);
    assert.deepEqual(page.gap, { fromSeq: 5, toSeq: 6, reason: 'evicted', clock: 6 });
    assert.deepEqual(
      page.chunks.map((c) => c.seq),
      [7, 8, 9, 10],
    );
    const small = new ReplayRing('small');
    feeder(small).chunk('only');
    assert.equal(small.tailAfterSeq(100), 0);
  });

  void test('finish keeps the output; release frees it and leaves the budget', () => {
    const budget = new ReplayBudget({ maxBytes: 1 << 20 });
    const ring = new ReplayRing('cmd', { budget });
    const f = feeder(ring);
    f.chunk('done\n');
    ring.finish(0, 12_345);
    assert.equal(ring.finishedAtMs, 12_345);
    assert.equal(ring.exitCode, 0);
    assert.deepEqual(texts(ring.replayFrom(0, 10)), ['done\n']);
    assert.equal(budget.usedBytes, ring.bytes);
    ring.release();
    ring.release();
    assert.equal(budget.usedBytes, 0);
    assert.equal(budget.ringCount, 0);
    assert.equal(ring.append({ seq: 2, stream: 'stdout', offset: 5, timestampMs: 1, bytes: enc.encode('x') }), 'released');
  });

  void test('a busy ring keeps exact bytes in slabs, within its limit and the budget, and gives everything back', () => {
    const budget = new ReplayBudget({ maxBytes: 64 << 20 });
    const ring = new ReplayRing('busy', { maxBytes: kSlabMinRingBytes, budget });
    // 3,000 chunks of 1-4,000 bytes, each from a different offset modulo 8 of a shared source
    const source = new Uint8Array(new SharedArrayBuffer(8192)).map((_, i) => (i * 7) & 0xff);
    const sent: Uint8Array[] = [];
    for (let seq = 1; seq <= 3000; seq++) {
      const at = seq % 13;
      const bytes = source.subarray(at, at + 1 + ((seq * 997) % 4000));
      sent.push(bytes.slice());
      assert.equal(ring.append({ seq, stream: 'stdout', offset: 0, timestampMs: seq, bytes }), 'stored');
      assert.ok(ring.bytes <= ring.maxBytes, `holds ${ring.bytes} > ${ring.maxBytes}`);
      assert.equal(budget.usedBytes, ring.bytes);
    }
    const kept: number[] = [];
    let after = 0;
    for (;;) {
      const page = ring.replayFrom(after, 1000);
      for (const c of page.chunks) {
        assert.deepEqual(c.bytes, sent[c.seq - 1], `chunk ${c.seq}`);
        kept.push(c.seq);
      }
      after = page.next.seq;
      if (!page.more) break;
    }
    assert.equal(kept.at(-1), 3000);
    assert.equal(kept[0], ring.evictedThroughSeq + 1);
    // it keeps most of its limit's worth of output: a slab of slack at most
    const keptBytes = kept.reduce((n, seq) => n + sent[seq - 1]!.byteLength + kEntryOverheadBytes, 0);
    assert.ok(keptBytes > ring.maxBytes - 2 * kSlabBytes, `kept ${keptBytes}`);
    ring.trimTo(0);
    assert.equal(ring.bytes, 0);
    assert.equal(budget.usedBytes, 0);
    ring.release();
    assert.equal(budget.ringCount, 0);
  });

  void test('agent-scoped cursors: resume by clock, exact unless inside the evicted prefix', () => {
    const perChunk = 1 + kEntryOverheadBytes;
    const ring = new ReplayRing('cmd', { maxBytes: perChunk * 3 });
    const f = feeder(ring);
    // clocks 100, 110, ... (other commands of the agent took the values in between)
    for (let i = 0; i < 6; i++) f.chunk(String(i), { clock: 100 + 10 * i });
    // seqs 1-3 evicted (through clock 120)
    assert.deepEqual(
      ring.replayAfter({ clock: 135, seq: 99 }, 10).chunks.map((c) => c.seq),
      [5, 6],
    );
    assert.equal(ring.replayAfter({ clock: 115, seq: 2 }, 10).gap?.fromSeq, 1, 'inside the evicted prefix: a lower bound');
    assert.equal(ring.replayAfter({ clock: 125, seq: 7 }, 10).gap, undefined);
    // before the command began: everything, gap exact
    const early = ring.replayAfter({ clock: 50, seq: 1 }, 10);
    assert.deepEqual(early.gap, { fromSeq: 1, toSeq: 3, reason: 'evicted', clock: 120 });
    assert.deepEqual(
      early.chunks.map((c) => c.seq),
      [4, 5, 6],
    );
    assert.throws(
      () => ring.append({ seq: 7, stream: 'stdout', offset: 6, timestampMs: 1, bytes: enc.encode('x'), clock: 150 }),
      RangeError,
    );
  });
});

void describe('ReplayBudget', () => {
  void test('water level: the largest rings are trimmed first, equal rings equally', () => {
    assert.equal(waterLevel([100, 10, 10], 50), 50);
    assert.equal(waterLevel([100, 90, 10], 40), 75);
    assert.equal(waterLevel([30, 30, 30], 30), 20);
    assert.equal(waterLevel([5, 5], 100), 0);
    assert.equal(waterLevel([], 0), 0);
  });

  void test('a flooding command loses its own history; a quiet one keeps its output', () => {
    const cost = 100 + kEntryOverheadBytes;
    const budget = new ReplayBudget({ maxBytes: cost * 20 });
    const quiet = new ReplayRing('quiet', { budget });
    const loud = new ReplayRing('loud', { budget });
    const q = feeder(quiet);
    const l = feeder(loud);
    let clock = 0;
    for (let i = 0; i < 3; i++) q.chunk('q'.repeat(100), { clock: ++clock });
    for (let i = 0; i < 200; i++) l.chunk('l'.repeat(100), { clock: ++clock });
    assert.ok(budget.usedBytes <= budget.maxBytes);
    assert.equal(budget.usedBytes, quiet.bytes + loud.bytes);
    assert.equal(quiet.evictedThroughSeq, 0, 'the quiet command kept everything');
    assert.ok(loud.evictedThroughSeq > 150);
    assert.ok(budget.trimCount >= 1);
  });

  void test('rejects nonsense limits', () => {
    assert.throws(() => new ReplayBudget({ maxBytes: -1 }), RangeError);
    assert.throws(() => new ReplayBudget({ lowWaterRatio: 0 }), RangeError);
    assert.throws(() => new ReplayRing('x', { maxBytes: 1.5 }), RangeError);
    assert.throws(() => new ReplayRing('x').replayFrom(0, 0), RangeError);
  });
});
