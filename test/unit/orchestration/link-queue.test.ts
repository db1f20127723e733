/**
 * The orchestration link's queue (src/orchestration/link-queue.ts): FIFO within its bounds; when
 * full the oldest message goes, and the next thing taken out is a gap record with the exact count
 * and the dropped ids; messages put back after a failed send keep their order.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LinkQueue, type Outgoing } from '../../../src/orchestration/link-queue.js';

const msg = (seq: number, text = `e${seq}`): { seq: number; text: string } => ({ seq, text });

/** Everything the queue hands out, as `e<seq>` for messages and `gap:<n>:<from>-<to>` for gaps. */
function drain(q: LinkQueue): string[] {
  const out: string[] = [];
  for (let o: Outgoing | null = q.shift(); o !== null; o = q.shift()) {
    out.push(o.kind === 'gap' ? `gap:${o.gap.dropped}:${o.gap.from_seq}-${o.gap.to_seq}` : o.message.text);
  }
  return out;
}

void describe('orchestration link queue', () => {
  void test('within its bounds it is FIFO and reports no gap', () => {
    const q = new LinkQueue({ maxMessages: 5, maxBytes: 1024 });
    for (let i = 1; i <= 5; i++) q.push(msg(i));
    assert.equal(q.length, 5);
    assert.deepEqual(drain(q), ['e1', 'e2', 'e3', 'e4', 'e5']);
    assert.equal(q.droppedTotal, 0);
    assert.equal(q.hasOutgoing, false);
  });

  void test('over the count bound the oldest go, and a gap record with the count comes first', () => {
    const drops: number[] = [];
    const q = new LinkQueue({ maxMessages: 3, maxBytes: 1024, onDrop: (n) => drops.push(n) });
    for (let i = 1; i <= 10; i++) q.push(msg(i));
    assert.equal(q.length, 3);
    assert.equal(q.pendingGap, 7);
    assert.deepEqual(drain(q), ['gap:7:1-7', 'e8', 'e9', 'e10']);
    assert.equal(q.droppedTotal, 7);
    assert.equal(
      drops.reduce((a, b) => a + b, 0),
      7,
    );
    // A gap is reported once: later messages come without one.
    q.push(msg(11));
    assert.deepEqual(drain(q), ['e11']);
  });

  void test('the byte bound drops the oldest too; a message larger than the bound drops itself', () => {
    const q = new LinkQueue({ maxMessages: 100, maxBytes: 10 });
    q.push(msg(1, 'aaaa'));
    q.push(msg(2, 'bbbb'));
    q.push(msg(3, 'cccc')); // 12 bytes: e1 goes
    assert.equal(q.bytes, 8);
    q.push(msg(4, 'x'.repeat(11))); // larger than the bound on its own: everything goes, itself last
    assert.equal(q.length, 0);
    assert.deepEqual(drain(q), ['gap:4:1-4']);
  });

  void test('drops between two takes add up into one gap before the survivors', () => {
    const q = new LinkQueue({ maxMessages: 2, maxBytes: 1024 });
    q.push(msg(1));
    q.push(msg(2));
    const first = q.shift();
    assert.equal(first?.kind === 'message' && first.message.text, 'e1');
    // e2 left; three more arrive: e2 and e3 drop
    q.push(msg(3));
    q.push(msg(4));
    q.push(msg(5));
    assert.deepEqual(drain(q), ['gap:2:2-3', 'e4', 'e5']);
  });

  void test('messages and a gap put back after a failed send keep their order; later drops merge into the gap', () => {
    const q = new LinkQueue({ maxMessages: 4, maxBytes: 1024 });
    for (let i = 1; i <= 6; i++) q.push(msg(i)); // e1, e2 dropped
    const taken: Outgoing[] = [];
    for (let i = 0; i < 3; i++) taken.push(q.shift() as Outgoing); // gap, e3, e4
    assert.deepEqual(
      taken.map((o) => (o.kind === 'gap' ? 'gap' : o.message.text)),
      ['gap', 'e3', 'e4'],
    );
    // The connection drops under them: put back.
    const gap = taken[0] as Extract<Outgoing, { kind: 'gap' }>;
    q.restoreGap(gap.gap);
    q.unshift(taken.slice(1).map((o) => (o as Extract<Outgoing, { kind: 'message' }>).message));
    assert.equal(q.length, 4);
    assert.deepEqual(drain(q), ['gap:2:1-2', 'e3', 'e4', 'e5', 'e6']);
  });

  void test('putting back over the bound drops the oldest of what was put back', () => {
    const q = new LinkQueue({ maxMessages: 3, maxBytes: 1024 });
    q.push(msg(1));
    q.push(msg(2));
    const a = q.shift() as Extract<Outgoing, { kind: 'message' }>;
    const b = q.shift() as Extract<Outgoing, { kind: 'message' }>;
    q.push(msg(3));
    q.push(msg(4));
    q.push(msg(5));
    q.unshift([a.message, b.message]); // 5 held, bound 3: e1, e2 go
    assert.deepEqual(drain(q), ['gap:2:1-2', 'e3', 'e4', 'e5']);
    assert.equal(q.droppedTotal, 2);
  });

  void test('memory stays bounded over many pushes and takes', () => {
    const q = new LinkQueue({ maxMessages: 50, maxBytes: 1 << 20 });
    for (let i = 1; i <= 20_000; i++) {
      q.push(msg(i));
      if (i % 3 !== 0) q.shift();
    }
    assert.ok(q.length <= 50);
    const out = drain(q);
    const last = out.at(-1);
    assert.equal(last, 'e20000');
  });
});
