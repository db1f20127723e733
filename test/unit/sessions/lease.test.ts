import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { LiveSubscriber } from '../../../src/http/live-subscriber.js';
import { wsLiveSink } from '../../../src/http/ws-route.js';
import { Membership } from '../../../src/sessions/lease.js';
import { ReplayBuffer, kReplayEntryOverheadBytes } from '../../../src/sessions/replay-buffer.js';
import type { SessionEvent } from '../../../src/sessions/session-dialect.js';
import { FakeSink } from './fake-sink.js';

describe('controller lease and membership', () => {
  test('one controller; a second controller request is granted observer (lease_held); leaving frees the lease', () => {
    const m = new Membership({ isLive: () => true });
    assert.deepEqual(m.join('a', 'controller'), { role: 'controller', requestedRole: 'controller' });
    assert.deepEqual(m.join('b', 'controller'), { role: 'observer', requestedRole: 'controller', reason: 'lease_held' });
    assert.deepEqual(m.join('c'), { role: 'observer', requestedRole: 'observer' });
    assert.deepEqual(m.snapshot(), { controllers: ['a'], observers: ['b', 'c'], attachment_count: 3 });
    assert.ok(m.mayDrive('a'));
    assert.equal(m.mayDrive('b'), false);
    assert.deepEqual(m.leave('a'), { wasController: true });
    assert.deepEqual(m.snapshot().controllers, []);
    assert.deepEqual(m.requestRole('b', 'controller'), { role: 'controller', requestedRole: 'controller' });
    assert.deepEqual(m.requestRole('b', 'observer'), { role: 'observer', requestedRole: 'observer', reason: 'released' });
    assert.equal(m.controller, undefined);
  });

  test('a dead holder is reaped before a request is judged', () => {
    const live = new Set(['a', 'b']);
    const m = new Membership({ isLive: (id) => live.has(id) });
    m.join('a', 'controller');
    live.delete('a');
    assert.deepEqual(m.join('b', 'controller'), { role: 'controller', requestedRole: 'controller' });
    assert.equal(m.has('a'), false);
  });

  test('lease moves are reported (free <-> held with the cause)', () => {
    const moves: string[] = [];
    const m = new Membership({ isLive: () => true, onLeaseChange: (s, h, cause) => moves.push(`${s}:${h ?? '-'}:${cause}`) });
    m.join('a', 'controller');
    m.leave('a');
    m.join('b', 'observer');
    m.requestRole('b', 'controller');
    m.requestRole('b', 'observer');
    assert.deepEqual(moves, ['held:a:granted', 'free:-:controller_left', 'held:b:granted', 'free:-:released']);
  });

  test('property: never more than one controller, and only it may drive', () => {
    const op = fc.tuple(fc.constantFrom('join-c', 'join-o', 'leave', 'req-c', 'req-o', 'kill'), fc.integer({ min: 0, max: 4 }));
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const dead = new Set<string>();
        const m = new Membership({ isLive: (id) => !dead.has(id) });
        for (const [kind, n] of ops) {
          const id = `c${n}`;
          if (kind === 'join-c' && !m.has(id)) m.join(id, 'controller');
          else if (kind === 'join-o' && !m.has(id)) m.join(id, 'observer');
          else if (kind === 'leave') m.leave(id);
          else if (kind === 'req-c' && m.has(id)) m.requestRole(id, 'controller');
          else if (kind === 'req-o' && m.has(id)) m.requestRole(id, 'observer');
          else if (kind === 'kill') dead.add(id);
          const s = m.snapshot();
          assert.ok(s.controllers.length <= 1);
          assert.equal(s.controllers.length + s.observers.length, s.attachment_count);
          for (let k = 0; k < 5; k++) assert.equal(m.mayDrive(`c${k}`), s.controllers[0] === `c${k}`);
        }
      }),
    );
  });
});

describe("a session client's bounded queue (LiveSubscriber over a WebSocket)", () => {
  test('a client that stops reading is cut off at the bound with slow_consumer and 4413; the other keeps getting frames', () => {
    const slow = new FakeSink();
    const fast = new FakeSink();
    let slowEvents = 0;
    const slowFrame = (): string => JSON.stringify({ op: 'Error', id: 'x', payload: { code: 'SLOW_CONSUMER', message: 'fell behind' } });
    const slowClose = { code: 4413, reason: 'slow consumer' };
    const s1 = new LiveSubscriber(wsLiveSink(slow, slowClose), { maxQueuedBytes: 1000, slowFrame, onSlow: () => slowEvents++ });
    const s2 = new LiveSubscriber(wsLiveSink(fast, slowClose), { maxQueuedBytes: 1000, slowFrame });
    slow.stopReading();
    const frame = 'x'.repeat(300);
    let sentToSlow = 0;
    for (let i = 0; i < 10; i++) {
      const out = JSON.stringify({ op: 'pty.session_frame', id: `f${i}`, sequence: i, payload: { kind: 'Output', data: frame } });
      if (s1.send(out)) sentToSlow++;
      assert.ok(s2.send(out));
    }
    const size = JSON.stringify({ op: 'pty.session_frame', id: 'f0', sequence: 0, payload: { kind: 'Output', data: frame } }).length;
    assert.equal(sentToSlow, Math.floor(1000 / size));
    assert.equal(slowEvents, 1);
    assert.equal(slow.closeCode, 4413);
    assert.equal(slow.last('Error')?.payload['code'], 'SLOW_CONSUMER');
    assert.ok(s1.closed && s1.cutOff);
    assert.equal(fast.all('Output').length, 10);
    assert.equal(fast.closed, false);
  });
});

describe('ReplayBuffer', () => {
  const out = (sequence: number, bytes: number): SessionEvent => ({
    kind: 'Output',
    stream: 'stdout',
    data: new Uint8Array(bytes),
    sequence,
    id: `e${sequence}`,
    ts: '2026-11-26T00:00:00Z',
  });

  test('keeps at least minFrames events, drops older ones past the soft bound, and says when a cursor is out of range', () => {
    const rb = new ReplayBuffer({ minFrames: 3, softBytes: 3 * (10 + kReplayEntryOverheadBytes), maxBytes: 1 << 20 });
    for (let seq = 1; seq <= 5; seq++) rb.append(out(seq, 10));
    assert.throws(() => rb.append(out(5, 1)), RangeError, 'a sequence must follow the newest');
    assert.deepEqual([rb.oldestSeq, rb.newestSeq, rb.size], [3, 5, 3]);
    const resume = rb.since(3);
    assert.deepEqual(resume.inRange ? resume.events.map((e) => e.sequence) : 'out', [4, 5]);
    const edge = rb.since(2);
    assert.deepEqual(edge.inRange ? edge.events.map((e) => e.sequence) : 'out', [3, 4, 5], 'missed nothing that is gone');
    assert.equal(rb.since(1).inRange, false);
    assert.equal(rb.since(6).inRange, false, 'a cursor from the future (an earlier server run)');
    const now = rb.since(5);
    assert.deepEqual(now.inRange ? now.events : 'out', []);
  });

  test('the hard byte bound wins over minFrames: a burst of large frames cannot pin unbounded memory', () => {
    const rb = new ReplayBuffer({ minFrames: 1000, softBytes: 0, maxBytes: 10 * (1000 + kReplayEntryOverheadBytes) });
    for (let seq = 1; seq <= 50; seq++) rb.append(out(seq, 1000));
    assert.equal(rb.size, 10);
    assert.ok(rb.bytes <= rb.maxBytes);
  });

  test('property: bytes stay within the hard bound, minFrames are kept while they fit, sequences stay contiguous', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 400 }), { maxLength: 200 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 3000 }),
        fc.integer({ min: 500, max: 20_000 }),
        (sizes, minFrames, softBytes, maxBytes) => {
          const rb = new ReplayBuffer({ minFrames, softBytes, maxBytes });
          sizes.forEach((len, i) => {
            rb.append(out(i + 1, len));
            assert.ok(rb.bytes <= maxBytes || rb.size === 1);
            const r = rb.since(rb.oldestSeq - 1);
            assert.ok(r.inRange);
            const seqs = r.events.map((e) => e.sequence);
            assert.deepEqual(
              seqs,
              seqs.map((_, k) => rb.oldestSeq + k),
            );
            assert.equal(seqs.at(-1), i + 1);
          });
        },
      ),
    );
  });
});
