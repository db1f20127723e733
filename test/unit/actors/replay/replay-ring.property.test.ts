/**
 * Model-based fuzzing of the replay rings: whatever agents send (chunk sizes, streams, seq jumps,
 * OutputGaps, resends) and however small the limits, memory stays within the ring and budget
 * limits, and a replay returns exactly the retained suffix with every missing seq reported.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { replayAgentAfter } from '../../../../actors/replay/agent-replay.js';
import { ReplayBudget } from '../../../../actors/replay/replay-budget.js';
import { kEntryOverheadBytes, ReplayRing, type OutputStreamName, type ReplayPage } from '../../../../actors/replay/replay-ring.js';

type Op =
  | { kind: 'chunk'; ring: number; jump: number; size: number; stream: OutputStreamName }
  | { kind: 'gap'; ring: number; len: number; lostBytes: number }
  | { kind: 'dup'; ring: number };

/** What the model expects a full replay to contain, one record per accounted seq range. */
type Rec =
  | { kind: 'chunk'; seq: number; clock: number; stream: OutputStreamName; bytes: Uint8Array }
  | { kind: 'gap'; from: number; to: number; clock: number; lostBytes?: number };

const streamArb = fc.constantFrom<OutputStreamName>('stdout', 'stderr', 'log');
const opArb = (rings: number): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 8,
      arbitrary: fc.record({
        kind: fc.constant('chunk' as const),
        ring: fc.nat(rings - 1),
        jump: fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, fc.integer({ min: 1, max: 3 })),
        size: fc.oneof(fc.constantFrom(0, 10), fc.integer({ min: 0, max: 600 })),
        stream: streamArb,
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('gap' as const),
        ring: fc.nat(rings - 1),
        len: fc.integer({ min: 1, max: 4 }),
        lostBytes: fc.nat(10_000),
      }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('dup' as const), ring: fc.nat(rings - 1) }) },
  );

const endOf = (r: Rec): number => (r.kind === 'chunk' ? r.seq : r.to);
const costOf = (r: Rec): number => (r.kind === 'chunk' ? r.bytes.byteLength : 0) + kEntryOverheadBytes;

type Item =
  | { gap: { fromSeq: number; toSeq: number; reason: string; lostBytes?: number } }
  | { seq: number; bytes: Uint8Array; stream: OutputStreamName };

/** All pages from `after` on, flattened. */
function replayAll(ring: ReplayRing, after: number, limit: number, stream?: OutputStreamName): Item[] {
  const items: Item[] = [];
  let page: ReplayPage;
  let guard = 0;
  do {
    page = ring.replayFrom(after, limit, stream);
    if (page.gap !== undefined) {
      const { fromSeq, toSeq, reason, lostBytes } = page.gap;
      items.push({ gap: lostBytes === undefined ? { fromSeq, toSeq, reason } : { fromSeq, toSeq, reason, lostBytes } });
    }
    assert.ok(page.chunks.length <= limit);
    for (const c of page.chunks) items.push({ seq: c.seq, bytes: c.bytes, stream: c.stream });
    assert.ok(page.next.seq >= after, 'next never goes back');
    after = page.next.seq;
    assert.ok(++guard < 100_000, 'replay terminates');
  } while (page.more);
  return items;
}

/** The model's expectation of replayAll. */
function expected(recs: readonly Rec[], evicted: number, after: number, stream?: OutputStreamName): Item[] {
  const out: Item[] = [];
  if (after < evicted) out.push({ gap: { fromSeq: after + 1, toSeq: evicted, reason: 'evicted' } });
  const from = Math.max(after, evicted);
  for (const r of recs) {
    if (endOf(r) <= from) continue;
    if (r.kind === 'gap') {
      const fromSeq = Math.max(r.from, from + 1);
      out.push({
        gap:
          fromSeq === r.from && r.lostBytes !== undefined
            ? { fromSeq, toSeq: r.to, reason: 'agent_dropped', lostBytes: r.lostBytes }
            : { fromSeq, toSeq: r.to, reason: 'agent_dropped' },
      });
    } else if (stream === undefined || r.stream === stream) out.push({ seq: r.seq, bytes: r.bytes, stream: r.stream });
  }
  return out;
}

void describe('replay rings under arbitrary input (fast-check)', () => {
  void test('bounded memory, strictly increasing seqs, exact suffix, exact gaps', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }).chain((rings) =>
          fc.record({
            rings: fc.constant(rings),
            // exact multiples of an entry's cost hit the eviction boundary
            ringMax: fc.oneof(
              fc.integer({ min: 0, max: 4000 }),
              fc.integer({ min: 0, max: 8 }).map((k) => k * (kEntryOverheadBytes + 10)),
            ),
            budgetMax: fc.oneof(
              fc.constant(-1),
              fc.integer({ min: 0, max: 6000 }),
              fc.integer({ min: 0, max: 12 }).map((k) => k * (kEntryOverheadBytes + 10)),
            ),
            ops: fc.array(opArb(rings), { maxLength: 120 }),
            limit: fc.integer({ min: 1, max: 7 }),
            after: fc.nat(60),
            stream: fc.option(streamArb, { nil: undefined }),
          }),
        ),
        ({ rings: n, ringMax, budgetMax, ops, limit, after, stream }) => {
          const budget = budgetMax < 0 ? undefined : new ReplayBudget({ maxBytes: budgetMax });
          const rings = Array.from(
            { length: n },
            (_, i) => new ReplayRing(`cmd-${i}`, budget === undefined ? { maxBytes: ringMax } : { maxBytes: ringMax, budget }),
          );
          const model: Rec[][] = rings.map(() => []);
          const last = rings.map(() => 0);
          let clock = 0;
          for (const op of ops) {
            const ring = rings[op.ring]!;
            const recs = model[op.ring]!;
            clock++;
            if (op.kind === 'chunk') {
              const seq = last[op.ring]! + 1 + op.jump;
              const bytes = new Uint8Array(op.size).map((_, i) => (i * 31 + seq) & 0xff);
              assert.equal(ring.append({ seq, stream: op.stream, offset: 0, timestampMs: clock, bytes, clock }), 'stored');
              if (op.jump > 0) recs.push({ kind: 'gap', from: last[op.ring]! + 1, to: seq - 1, clock });
              recs.push({ kind: 'chunk', seq, clock, stream: op.stream, bytes });
              last[op.ring] = seq;
            } else if (op.kind === 'gap') {
              const from = last[op.ring]! + 1;
              const to = from + op.len - 1;
              assert.equal(ring.appendGap({ firstSeq: from, lastSeq: to, lostBytes: op.lostBytes, timestampMs: clock, clock }), 'stored');
              recs.push({ kind: 'gap', from, to, clock, lostBytes: op.lostBytes });
              last[op.ring] = to;
            } else if (last[op.ring]! > 0) {
              const r = ring.append({
                seq: last[op.ring]!,
                stream: 'stdout',
                offset: 0,
                timestampMs: clock,
                bytes: new Uint8Array(3),
                clock,
              });
              assert.equal(r, 'duplicate');
            }
            // bounds hold after every single operation
            for (const r of rings) assert.ok(r.bytes <= ringMax, `ring ${r.commandId} holds ${r.bytes} > ${ringMax}`);
            if (budget !== undefined) {
              assert.ok(budget.usedBytes <= budget.maxBytes, `budget holds ${budget.usedBytes} > ${budget.maxBytes}`);
              assert.equal(
                budget.usedBytes,
                rings.reduce((s, r) => s + r.bytes, 0),
              );
            }
          }
          rings.forEach((ring, i) => {
            const recs = model[i]!;
            const evicted = ring.evictedThroughSeq;
            assert.equal(ring.lastSeq, last[i]);
            // what is retained is exactly the suffix after the evicted seqs, and costs what is charged
            const retained = recs.filter((r) => endOf(r) > evicted);
            assert.equal(
              ring.bytes,
              retained.reduce((s, r) => s + costOf(r), 0),
            );
            assert.equal(ring.entryCount, retained.length);
            // without a shared budget, eviction is minimal: the next older entry would not have fitted
            if (budget === undefined && evicted > 0) {
              const older = recs.filter((r) => endOf(r) <= evicted).at(-1)!;
              assert.ok(ring.bytes + costOf(older) > ringMax, 'evicted only what had to go');
            }
            // full replay and a replay from an arbitrary seq, paged by `limit`
            const full = replayAll(ring, 0, limit);
            assert.deepEqual(full, expected(recs, evicted, 0));
            const seqs = full.flatMap((it) => ('gap' in it ? [it.gap.fromSeq, it.gap.toSeq] : [it.seq]));
            for (let k = 1; k < seqs.length; k++) assert.ok(seqs[k]! >= seqs[k - 1]!, 'seqs increase');
            const coverage = full.flatMap((it) =>
              'gap' in it ? Array.from({ length: it.gap.toSeq - it.gap.fromSeq + 1 }, (_, j) => it.gap.fromSeq + j) : [it.seq],
            );
            assert.deepEqual(
              coverage,
              recs.flatMap((r) => (r.kind === 'chunk' ? [r.seq] : Array.from({ length: r.to - r.from + 1 }, (_, j) => r.from + j))),
              'every seq accounted once, in order',
            );
            assert.deepEqual(replayAll(ring, after, limit, stream), expected(recs, evicted, after, stream));
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  void test('agent-scoped merge delivers every retained chunk of every command once, in clock order', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            ring: fc.nat(2),
            size: fc.integer({ min: 0, max: 300 }),
            jump: fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, fc.constant(2)),
          }),
          { maxLength: 80 },
        ),
        fc.integer({ min: 0, max: 5000 }),
        fc.integer({ min: 1, max: 6 }),
        fc.nat(90),
        (ops, budgetMax, limit, cursorClock) => {
          const budget = new ReplayBudget({ maxBytes: budgetMax });
          const rings = [0, 1, 2].map((i) => new ReplayRing(`c${i}`, { budget }));
          const last = [0, 0, 0];
          const clocks: Array<{ ring: number; seq: number; clock: number }> = [];
          let clock = 0;
          for (const op of ops) {
            clock++;
            const seq = last[op.ring]! + 1 + op.jump;
            rings[op.ring]!.append({ seq, stream: 'stdout', offset: 0, timestampMs: clock, bytes: new Uint8Array(op.size), clock });
            clocks.push({ ring: op.ring, seq, clock });
            last[op.ring] = seq;
          }
          const cursorSeq = clocks.find((c) => c.clock === cursorClock)?.seq ?? 0;
          const got: Array<{ commandId: string; seq: number; clock: number }> = [];
          let cursor = { clock: cursorClock, seq: cursorSeq };
          for (let guard = 0; ; guard++) {
            assert.ok(guard < 10_000);
            const page = replayAgentAfter(rings, cursor, limit);
            assert.ok(page.items.filter((it) => it.chunk !== undefined).length <= limit);
            for (const it of page.items) {
              const key =
                it.chunk !== undefined ? { clock: it.chunk.clock, seq: it.chunk.seq } : { clock: it.gap.clock, seq: it.gap.toSeq };
              assert.ok(key.clock > cursor.clock || (key.clock === cursor.clock && key.seq > cursor.seq), 'strictly after the cursor');
              if (it.chunk !== undefined) got.push({ commandId: it.commandId, seq: it.chunk.seq, clock: it.chunk.clock });
              cursor = key;
            }
            if (!page.more) break;
          }
          const want = clocks
            .filter((c) => c.clock > cursorClock && c.seq > rings[c.ring]!.evictedThroughSeq)
            .map((c) => ({ commandId: `c${c.ring}`, seq: c.seq, clock: c.clock }));
          assert.deepEqual(got, want);
        },
      ),
      { numRuns: 300 },
    );
  });
});
