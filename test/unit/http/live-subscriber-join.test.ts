/**
 * The LiveSubscriber features the joins use: replay pages written while live frames are held,
 * an in-order last frame (endWith) that closes the stream after everything before it, waiting for
 * the queue to drain between pages, and replay bytes not counted as falling behind.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { MemorySseSink } from '../../../src/http/inject.js';
import { encodeSlowSubscriberSse } from '../../../actors/protocol/output-events.js';
import { LiveSubscriber, type LiveSink, type LiveSubscriberOptions } from '../../../src/http/live-subscriber.js';
import { afterOutputClock } from '../../../src/streaming/output-join.js';
import { SseTopics } from '../../../src/streaming/sse-topics.js';

/** A subscriber with agent output's slow frame (the SSE streams' default). */
const live = (sink: LiveSink, opts: Partial<LiveSubscriberOptions> = {}): LiveSubscriber =>
  new LiveSubscriber(sink, { slowFrame: encodeSlowSubscriberSse, ...opts });

const enc = new TextEncoder();
const ev = (id: string, size = 10): { frame: Uint8Array; cursor: string } => ({
  frame: enc.encode(`id: ${id}\ndata: ${'x'.repeat(size)}\n\n`),
  cursor: id,
});
const ids = (sink: MemorySseSink): string[] =>
  sink.frames
    .join('')
    .split('\n')
    .filter((l) => l.startsWith('id: '))
    .map((l) => l.slice(4));

void describe('LiveSubscriber joins', () => {
  void test('replay pages go out while live frames are held; resumeLive keeps only the new ones', () => {
    const sink = new MemorySseSink();
    const sub = live(sink, { holdLive: true });
    sub.send(ev('5-5').frame, '5-5'); // live, emitted before the replay call: covered by it
    sub.sendReplay([ev('1-1'), ev('2-2')]);
    sub.send(ev('7-7').frame, '7-7'); // live, after
    sub.sendReplay([ev('3-3'), ev('5-5')]);
    assert.deepEqual(ids(sink), ['1-1', '2-2', '3-3', '5-5']);
    sub.resumeLive([], afterOutputClock(6));
    assert.deepEqual(ids(sink), ['1-1', '2-2', '3-3', '5-5', '7-7']);
    sub.send(ev('8-8').frame, '8-8');
    assert.deepEqual(ids(sink).slice(-1), ['8-8']);
  });

  void test('endWith: the last frame after everything queued, then closed; nothing after it', () => {
    const sink = new MemorySseSink();
    const sub = live(sink);
    sink.setBackpressure(true);
    sub.send(ev('1-1').frame, '1-1');
    sub.send(ev('2-2').frame, '2-2');
    sub.endWith(enc.encode('event: end\ndata: {}\n\n'));
    assert.equal(sub.send(ev('3-3').frame, '3-3'), false, 'refused after the end');
    assert.equal(sub.closed, false, 'waits for the queue');
    sink.setBackpressure(false);
    assert.equal(sub.closed, true);
    assert.ok(sink.closed);
    assert.deepEqual(ids(sink), ['1-1', '2-2']);
    assert.match(sink.frames.at(-1)!, /^event: end/);
  });

  void test('endWith while holding: held like live frames, and closes after the replay', () => {
    const sink = new MemorySseSink();
    const sub = live(sink, { holdLive: true });
    sub.send(ev('9-9').frame, '9-9');
    sub.endWith(enc.encode('event: end\ndata: {}\n\n'));
    assert.equal(sub.closed, false);
    sub.resumeLive([ev('1-1')], () => true);
    assert.deepEqual(ids(sink), ['1-1', '9-9']);
    assert.equal(sub.closed, true);
  });

  void test('whenDrained resolves once the sink took everything, or on close', async () => {
    const sink = new MemorySseSink();
    const sub = live(sink);
    await sub.whenDrained();
    sink.setBackpressure(true);
    sub.send(ev('1-1').frame, '1-1');
    sub.send(ev('2-2').frame, '2-2');
    let drained = false;
    const p = sub.whenDrained().then(() => (drained = true));
    await Promise.resolve();
    assert.equal(drained, false);
    sink.setBackpressure(false);
    await p;
    sink.setBackpressure(true);
    sub.send(ev('3-3').frame, '3-3');
    sub.send(ev('4-4').frame, '4-4');
    const q = sub.whenDrained();
    sub.close();
    await q;
  });

  void test('a big replay under backpressure is not mistaken for falling behind; live bytes still count', () => {
    const sink = new MemorySseSink();
    const sub = live(sink, { maxQueuedBytes: 1000, holdLive: true });
    sink.setBackpressure(true);
    sub.sendReplay([ev('1-1', 5000), ev('2-2', 5000)]);
    sub.resumeLive([], () => true);
    assert.equal(sub.closed, false, '10 KB of replay over a 1 KB bound');
    sub.send(ev('3-3', 400).frame, '3-3');
    assert.equal(sub.closed, false);
    sub.send(ev('4-4', 800).frame, '4-4');
    assert.equal(sub.cutOff, true, 'live frames beyond the bound cut it off');
  });

  void test('SseTopics.publishEnd ends every subscriber of the topic in order', () => {
    const topics = new SseTopics();
    const sinks = [new MemorySseSink(), new MemorySseSink()];
    const subs = sinks.map((s) => live(s));
    for (const s of subs) topics.subscribe('t', s);
    sinks[1]!.setBackpressure(true);
    topics.publish('t', ev('1-1').frame, '1-1');
    topics.publish('t', ev('2-2').frame, '2-2');
    assert.equal(topics.publishEnd('t', enc.encode('event: end\ndata: {}\n\n')), 2);
    assert.equal(subs[0]!.closed, true);
    assert.equal(subs[1]!.closed, false);
    sinks[1]!.setBackpressure(false);
    assert.equal(subs[1]!.closed, true);
    assert.deepEqual(ids(sinks[1]!), ['1-1', '2-2']);
    assert.equal(topics.subscriberCount(), 0);
  });

  void test('fast-check: a join never loses or repeats an event, whatever the interleaving', () => {
    // Events 1..n with clock = seq. The actor answers after event `k` was emitted: the replay has
    // events (cursor, k]; live events k+1..n arrive around it. The client gets cursor+1..n exactly once.
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.nat(40),
        fc.nat(40),
        fc.nat(40),
        fc.integer({ min: 1, max: 7 }),
        (n, c, k0, subAt0, page) => {
          const cursor = c % (n + 1);
          const k = Math.max(cursor, k0 % (n + 1));
          const subAt = Math.min(k, subAt0 % (n + 1)); // live frames published after subscribing: subAt+1..n
          const sink = new MemorySseSink();
          const sub = live(sink, { holdLive: true });
          for (let s = subAt + 1; s <= k; s++) sub.send(ev(`${s}-${s}`).frame, `${s}-${s}`);
          const replay = Array.from({ length: k - cursor }, (_, i) => ev(`${cursor + i + 1}-${cursor + i + 1}`));
          for (let i = 0; i < replay.length; i += page) sub.sendReplay(replay.slice(i, i + page));
          const mid = Math.floor((k + n) / 2);
          for (let s = k + 1; s <= mid; s++) sub.send(ev(`${s}-${s}`).frame, `${s}-${s}`);
          sub.resumeLive([], afterOutputClock(k));
          for (let s = mid + 1; s <= n; s++) sub.send(ev(`${s}-${s}`).frame, `${s}-${s}`);
          assert.deepEqual(
            ids(sink),
            Array.from({ length: n - cursor }, (_, i) => `${cursor + i + 1}-${cursor + i + 1}`),
          );
        },
      ),
    );
  });
});
