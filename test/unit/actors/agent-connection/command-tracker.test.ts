/**
 * The per-command sequence bookkeeping, fuzzed: whatever order, repetition and gaps the chunks
 * arrive in (resends after reconnects included), every seq is accepted at most once, accepted
 * seqs only increase, and together with the reported gaps they cover 1..max without holes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { CommandTracker } from '../../../../actors/agent-connection/command-tracker.js';

void describe('CommandTracker', () => {
  void test('accepted seqs and gaps tile 1..max exactly, each once, in order', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 120 }),
        fc.option(fc.integer({ min: 0, max: 50 })),
        (seqs, resultLast) => {
          const t = new CommandTracker();
          t.start('c', { source: 'server', dispatchedAtMs: 0, pty: false });
          const covered: number[] = [];
          let last = 0;
          for (const s of seqs) {
            const v = t.acceptChunk('c', s);
            if (v.kind === 'duplicate') continue;
            if (v.missing) for (let i = v.missing.first; i <= v.missing.last; i++) covered.push(i);
            assert.ok(v.seq > last, 'increasing');
            last = v.seq;
            covered.push(v.seq);
          }
          if (resultLast !== null) {
            const r = t.finish('c', resultLast);
            assert.equal(r.kind, 'accept');
            if (r.kind === 'accept' && r.missing) for (let i = r.missing.first; i <= r.missing.last; i++) covered.push(i);
            assert.equal(t.finish('c', resultLast).kind, 'duplicate');
            assert.equal(t.acceptChunk('c', 1000).kind, 'duplicate', 'nothing after the result');
          }
          assert.deepEqual(
            covered,
            Array.from({ length: covered.length }, (_, i) => i + 1),
          );
        },
      ),
      { numRuns: 400 },
    );
  });

  void test('seq 0 (an unnumbered sender) gets the next seq', () => {
    const t = new CommandTracker();
    const a = t.acceptChunk('x', 0);
    const b = t.acceptChunk('x', 0);
    assert.deepEqual([a.kind === 'accept' && a.seq, b.kind === 'accept' && b.seq], [1, 2]);
  });

  void test('cursors name only commands with something held; finished commands are remembered up to the bound', () => {
    const t = new CommandTracker(2);
    t.start('a', { source: 'server', dispatchedAtMs: 0, pty: false });
    t.acceptChunk('a', 3);
    t.start('b', { source: 'server', dispatchedAtMs: 0, pty: false });
    assert.deepEqual(t.cursorsFor([{ commandId: 'a' }, { commandId: 'b' }, { commandId: 'z' }]), [{ commandId: 'a', lastSeq: 3 }]);
    for (const id of ['a', 'b', 'c', 'd']) t.finish(id, 1);
    assert.equal(t.get('a'), undefined, 'the oldest finished command is forgotten');
    assert.equal(t.get('d')?.finished, true);
    assert.equal(t.start('d', { source: 'server', dispatchedAtMs: 0, pty: false }), null, 'a known id cannot start again');
  });

  void test('an endless stream of unknown command ids stays bounded', () => {
    const t = new CommandTracker(4);
    for (let i = 0; i < 1000; i++) t.acceptChunk(`junk-${i}`, 1);
    assert.ok(t.running <= 16);
  });
});
