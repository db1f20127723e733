import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { LiveSubscriber } from '../../../src/http/live-subscriber.js';
import { wsLiveSink } from '../../../src/http/ws-route.js';
import { Membership } from '../../../src/sessions/lease.js';
import { ReplayBuffer, kReplayEntryOverheadBytes } from '../../../src/sessions/replay-buffer.js';
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
    const slowFrame = (): string => JSON.stringify({ op: 'error', code: 'slow_consumer', message: 'fell behind', fatal: true });
    const slowClose = { code: 4413, reason: 'slow consumer' };
    const s1 = new LiveSubscriber(wsLiveSink(slow, slowClose), { maxQueuedBytes: 1000, slowFrame, onSlow: () => slowEvents++ });
    const s2 = new LiveSubscriber(wsLiveSink(fast, slowClose), { maxQueuedBytes: 1000, slowFrame });
    slow.stopReading();
    const frame = 'x'.repeat(300);
    let sentToSlow = 0;
    for (let i = 0; i < 10; i++) {
      if (s1.send(JSON.stringify({ op: 'pty.output', seq: i, data: frame }))) sentToSlow++;
      assert.ok(s2.send(JSON.stringify({ op: 'pty.output', seq: i, data: frame })));
    }
    assert.equal(sentToSlow, Math.floor(1000 / JSON.stringify({ op: 'pty.output', seq: 0, data: frame }).length));
    assert.equal(slowEvents, 1);
    assert.equal(slow.closeCode, 4413);
    assert.deepEqual(slow.last('error'), { op: 'error', code: 'slow_consumer', message: slow.last('error')?.['message'], fatal: true });
    assert.ok(s1.closed && s1.cutOff);
    assert.equal(fast.all('pty.output').length, 10);
    assert.equal(fast.closed, false);
  });
});

describe('ReplayBuffer', () => {
  test('keeps the newest frames within its byte bound and tells a rejoining client whether to reset', () => {
    const rb = new ReplayBuffer(3 * (10 + kReplayEntryOverheadBytes));
    for (let seq = 1; seq <= 5; seq++) assert.ok(rb.append(seq, new Uint8Array(10).fill(seq)));
    assert.equal(rb.append(5, new Uint8Array(1)), false, 'duplicate');
    assert.deepEqual([rb.oldestSeq, rb.newestSeq], [3, 5]);
    const fresh = rb.since(undefined);
    assert.deepEqual([fresh.reset, fresh.frames.map((f) => f.seq), fresh.fromSeq, fresh.toSeq], [true, [3, 4, 5], 3, 5]);
    const resume = rb.since(4);
    assert.deepEqual([resume.reset, resume.frames.map((f) => f.seq)], [false, [4, 5]]);
    const gone = rb.since(2);
    assert.deepEqual([gone.reset, gone.frames.map((f) => f.seq)], [true, [3, 4, 5]]);
    const ahead = rb.since(6);
    assert.deepEqual([ahead.reset, ahead.frames.length], [false, 0]);
    rb.append(6, new Uint8Array(10_000));
    assert.ok(rb.isEmpty, 'a frame larger than the window clears it');
    assert.deepEqual([rb.since(6).reset, rb.newestSeq], [true, 6]);
  });

  test('property: bytes never exceed the bound and seqs stay increasing', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 400 })), { maxLength: 200 }),
        fc.integer({ min: 0, max: 3000 }),
        (steps, max) => {
          const rb = new ReplayBuffer(max);
          let seq = 0;
          for (const [gap, len] of steps) {
            seq += gap;
            rb.append(seq, new Uint8Array(len));
            assert.ok(rb.bytes <= max);
            const seqs = rb.since(undefined).frames.map((f) => f.seq);
            assert.deepEqual(
              seqs,
              [...seqs].sort((a, b) => a - b),
            );
          }
        },
      ),
    );
  });
});
