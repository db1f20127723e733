import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  ENTRY_OVERHEAD_BYTES,
  GAP_REASON_BUFFER_FULL,
  GAP_REASON_NOT_RETAINED,
  OutputBuffer,
  type ChunkEntry,
  type OutboundEntry,
  type ResultEntry,
} from '../../../src/guest-agent/output-buffer.js';

function chunk(commandId: string, seq: number, bytes: number, stream: ChunkEntry['stream'] = 'stdout'): ChunkEntry {
  return { kind: 'chunk', stream, commandId, seq, offset: 0, data: Buffer.alloc(bytes, seq & 0xff), timestampMs: 1, eof: false };
}

function result(commandId: string, lastSeq: number): ResultEntry {
  return { kind: 'result', commandId, exitCode: 0, error: '', durationMs: 1, timedOutBy: '', lastSeq };
}

function drain(b: OutputBuffer): OutboundEntry[] {
  const out: OutboundEntry[] = [];
  for (let e = b.next(); e; e = b.next()) out.push(e);
  return out;
}

describe('OutputBuffer', () => {
  test('delivers everything in order when it fits', () => {
    const b = new OutputBuffer(1 << 20);
    b.push(chunk('a', 1, 10));
    b.push(chunk('b', 1, 10));
    b.push(chunk('a', 2, 10));
    b.push(result('a', 2));
    const got = drain(b).map((e) => `${e.kind}:${e.commandId}:${e.kind === 'chunk' ? e.seq : ''}`);
    assert.deepEqual(got, ['chunk:a:1', 'chunk:b:1', 'chunk:a:2', 'result:a:']);
    assert.equal(b.pending, 0);
  });

  test('stays within its byte bound by evicting the oldest chunks into one gap per command', () => {
    const per = 1000 + ENTRY_OVERHEAD_BYTES;
    const b = new OutputBuffer(per * 5);
    for (let s = 1; s <= 20; s++) b.push(chunk('a', s, 1000));
    assert.ok(b.bytes <= per * 5, `bytes ${b.bytes}`);
    const got = drain(b);
    const gap = got[0];
    assert.equal(gap?.kind, 'gap');
    if (gap?.kind !== 'gap') return;
    assert.equal(gap.commandId, 'a');
    assert.equal(gap.firstSeq, 1);
    assert.equal(gap.reason, GAP_REASON_BUFFER_FULL);
    const rest = got.slice(1).map((e) => (e.kind === 'chunk' ? e.seq : -1));
    assert.equal(gap.lastSeq + 1, rest[0], 'chunks resume right after the gap');
    assert.deepEqual(
      rest,
      Array.from({ length: 20 - gap.lastSeq }, (_, i) => gap.lastSeq + 1 + i),
    );
    assert.equal(gap.lostBytes, gap.lastSeq * 1000);
    assert.equal(b.stats().evictedBytes, gap.lostBytes);
  });

  test('never evicts CommandResults', () => {
    const b = new OutputBuffer(3 * (100 + ENTRY_OVERHEAD_BYTES));
    b.push(chunk('a', 1, 100));
    b.push(result('a', 1));
    for (let s = 1; s <= 50; s++) b.push(chunk('b', s, 100));
    const got = drain(b);
    assert.ok(got.some((e) => e.kind === 'result' && e.commandId === 'a'));
  });

  test('registration cursors report the highest seq sent or dropped', () => {
    const b = new OutputBuffer(1 << 20);
    for (let s = 1; s <= 3; s++) b.push(chunk('a', s, 10));
    b.push(chunk('b', 1, 10));
    b.next();
    b.next();
    assert.deepEqual(
      b.cursors().sort((x, y) => x.commandId.localeCompare(y.commandId)),
      [
        { commandId: 'a', lastSeq: 2 },
        { commandId: 'b', lastSeq: 0 },
      ],
    );
  });

  test('rewind resends what the server lacks, in order, and drops what it holds', () => {
    const b = new OutputBuffer(1 << 20);
    for (let s = 1; s <= 5; s++) b.push(chunk('a', s, 10));
    drain(b); // all five in flight when the stream dies
    b.push(chunk('a', 6, 10)); // produced while disconnected
    b.rewind(new Map([['a', 3]]));
    assert.deepEqual(
      drain(b).map((e) => (e.kind === 'chunk' ? e.seq : e.kind)),
      [4, 5, 6],
    );
  });

  test('output a server said it holds is kept: if that server dies too, the next one gets it', () => {
    const b = new OutputBuffer(1 << 20);
    for (let s = 1; s <= 3; s++) b.push(chunk('a', s, 10));
    drain(b);
    b.rewind(new Map([['a', 3]])); // server 1 (restarting) holds everything, then dies
    assert.equal(b.pending, 0);
    b.push(chunk('a', 4, 10));
    b.rewind(new Map()); // server 2 holds nothing
    assert.deepEqual(
      drain(b).map((e) => (e.kind === 'chunk' ? e.seq : e.kind)),
      [1, 2, 3, 4],
    );
  });

  test('rewind reports sent chunks evicted before delivery was confirmed as a gap with exact bytes', () => {
    const per = 100 + ENTRY_OVERHEAD_BYTES;
    const b = new OutputBuffer(per * 4);
    for (let s = 1; s <= 4; s++) b.push(chunk('a', s, 100));
    drain(b);
    for (let s = 5; s <= 8; s++) b.push(chunk('a', s, 100)); // pushes out sent 1..4
    b.rewind(new Map([['a', 2]]));
    const got = drain(b);
    assert.deepEqual(got[0], { kind: 'gap', commandId: 'a', firstSeq: 3, lastSeq: 4, lostBytes: 200, reason: GAP_REASON_BUFFER_FULL });
    assert.deepEqual(
      got.slice(1).map((e) => (e.kind === 'chunk' ? e.seq : e.kind)),
      [5, 6, 7, 8],
    );
  });

  test('output released as delivered is reported as a gap to a server that lost it', () => {
    let now = 1000;
    const b = new OutputBuffer(1 << 20, () => now);
    for (let s = 1; s <= 3; s++) b.push(chunk('a', s, 50));
    drain(b);
    now = 60_000;
    b.releaseDelivered(now - 35_000);
    b.push(chunk('a', 4, 50));
    b.rewind(new Map()); // a restarted server holds nothing
    const got = drain(b);
    assert.deepEqual(got[0], { kind: 'gap', commandId: 'a', firstSeq: 1, lastSeq: 3, lostBytes: 150, reason: GAP_REASON_NOT_RETAINED });
    assert.equal(got[1]?.kind === 'chunk' ? got[1].seq : -1, 4);
  });

  test('a retained CommandResult is resent after a reconnect (the server dedupes it)', () => {
    const b = new OutputBuffer(1 << 20);
    b.push(chunk('a', 1, 10));
    b.push(result('a', 1));
    drain(b);
    b.rewind(new Map([['a', 1]]));
    assert.deepEqual(
      drain(b).map((e) => e.kind),
      ['result'],
    );
  });

  test('property: the server sees every seq exactly once, in order, with exact byte counts', () => {
    type Op =
      | { op: 'push'; cmd: number; bytes: number }
      | { op: 'send'; n: number }
      | { op: 'release' }
      | { op: 'disconnect'; lostInFlight: number; serverRestart: boolean };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          op: fc.constant('push' as const),
          cmd: fc.integer({ min: 0, max: 2 }),
          bytes: fc.integer({ min: 0, max: 300 }),
        }),
      },
      { weight: 3, arbitrary: fc.record({ op: fc.constant('send' as const), n: fc.integer({ min: 1, max: 8 }) }) },
      { weight: 1, arbitrary: fc.constant({ op: 'release' as const }) },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant('disconnect' as const),
          lostInFlight: fc.integer({ min: 0, max: 5 }),
          serverRestart: fc.boolean(),
        }),
      },
    );
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 120 }), fc.integer({ min: 1, max: 2000 }), (ops, capacity) => {
        let clock = 1;
        const b = new OutputBuffer(capacity, () => clock);
        const seqOf = [0, 0, 0];
        const bytesOf = [0, 0, 0];
        // Server model: per command, highest seq held and bytes accounted (data + gap lost bytes).
        let held = new Map<string, number>();
        let accounted = new Map<string, number>();
        let inFlight: { e: OutboundEntry; at: number }[] = [];
        let deliveredUpTo = 0; // clock of the last entry the server surely got
        const receive = (e: OutboundEntry): void => {
          const id = e.commandId;
          const h = held.get(id) ?? 0;
          if (e.kind === 'chunk') {
            if (e.seq <= h) return; // duplicate, dropped by seq
            assert.equal(e.seq, h + 1, `chunk ${id}#${e.seq} after ${h}`);
            held.set(id, e.seq);
            accounted.set(id, (accounted.get(id) ?? 0) + e.data.length);
          } else if (e.kind === 'gap') {
            if (e.lastSeq <= h) return;
            assert.equal(e.firstSeq, h + 1, `gap ${id}#${e.firstSeq}..${e.lastSeq} after ${h}`);
            held.set(id, e.lastSeq);
            accounted.set(id, (accounted.get(id) ?? 0) + e.lostBytes);
          } else {
            assert.equal(e.lastSeq, h, `result of ${id} after seq ${h}, expected ${e.lastSeq}`);
          }
        };
        const flushInFlight = (): void => {
          for (const f of inFlight) {
            receive(f.e);
            deliveredUpTo = f.at;
          }
          inFlight = [];
        };
        for (const o of ops) {
          clock += 1;
          if (o.op === 'push') {
            seqOf[o.cmd] = (seqOf[o.cmd] ?? 0) + 1;
            bytesOf[o.cmd] = (bytesOf[o.cmd] ?? 0) + o.bytes;
            b.push(chunk(`c${o.cmd}`, seqOf[o.cmd] ?? 0, o.bytes));
          } else if (o.op === 'send') {
            for (let i = 0; i < o.n; i++) {
              const e = b.next();
              if (!e) break;
              inFlight.push({ e, at: clock });
            }
            // Everything but the newest two arrives; those stay in flight.
            const arrive = inFlight.splice(0, Math.max(0, inFlight.length - 2));
            for (const f of arrive) {
              receive(f.e);
              deliveredUpTo = f.at;
            }
          } else if (o.op === 'release') {
            flushInFlight(); // a keepalive round trip: everything sent so far arrived
            b.releaseDelivered(deliveredUpTo);
          } else {
            inFlight.splice(Math.max(0, inFlight.length - o.lostInFlight));
            flushInFlight();
            if (o.serverRestart) {
              held = new Map();
              accounted = new Map();
            }
            b.rewind(new Map(held));
          }
        }
        // Final reconnect, then send everything.
        inFlight = [];
        b.rewind(new Map(held));
        for (let e = b.next(); e; e = b.next()) receive(e);
        for (let c = 0; c < 3; c++) {
          const id = `c${c}`;
          if ((seqOf[c] ?? 0) === 0) continue;
          assert.equal(held.get(id) ?? 0, seqOf[c], `${id}: server holds through ${held.get(id)} of ${seqOf[c]}`);
          assert.equal(accounted.get(id) ?? 0, bytesOf[c], `${id}: data + lost bytes`);
        }
      }),
      { numRuns: 500 },
    );
  });
});
