import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { encodeOutputSse } from '../../support/reference-encode.js';
import { LiveOutputEncoder } from '../../support/reference-output-event.js';
import type { ReplayChunk } from '../../../actors/replay/replay-ring.js';
import { MemorySseSink } from '../../../src/http/inject.js';
import { encodeSlowSubscriberSse } from '../../../actors/protocol/output-events.js';
import { LiveSubscriber, type LiveSink, type LiveSubscriberOptions } from '../../../src/http/live-subscriber.js';
import { afterOutputClock } from '../../../src/streaming/output-join.js';
import { SseTopics } from '../../../src/streaming/sse-topics.js';
import { parseSse } from '../actors/replay/sse-parse.js';

/** A subscriber with agent output's slow frame (the SSE streams' default). */
const live = (sink: LiveSink, opts: Partial<LiveSubscriberOptions> = {}): LiveSubscriber =>
  new LiveSubscriber(sink, { slowFrame: encodeSlowSubscriberSse, ...opts });

/** A realistic stream: 4 KiB PTY chunks encoded once as agent_output frames. */
function frames(count: number, chunkBytes = 4096): Array<{ frame: Uint8Array; cursor: string }> {
  const live = new LiveOutputEncoder('agent-1', 'cmd-1');
  const out = [];
  for (let seq = 1; seq <= count; seq++) {
    const bytes = new Uint8Array(chunkBytes).fill(0x61 + (seq % 26));
    const chunk: Omit<ReplayChunk, 'carry'> = {
      kind: 'chunk',
      seq,
      stream: 'stdout',
      offset: (seq - 1) * chunkBytes,
      timestampMs: seq,
      clock: 1000 + seq,
      eof: false,
      bytes,
    };
    const ev = live.next(chunk);
    out.push({ frame: encodeOutputSse(ev), cursor: ev.cursor });
  }
  return out;
}

const ids = (sink: MemorySseSink) => parseSse(sink.frames.join('')).map((e) => e.id);

void describe('LiveSubscriber', () => {
  void test('writes straight through while the sink keeps up', () => {
    const sink = new MemorySseSink();
    const sub = live(sink);
    for (const f of frames(5)) assert.equal(sub.send(f.frame, f.cursor), true);
    assert.equal(sink.frames.length, 5);
    assert.equal(sub.cursor, '1005-5');
    assert.equal(sub.queuedBytes, 0);
  });

  void test('under backpressure frames wait, in order, and go out when the sink drains', () => {
    const sink = new MemorySseSink();
    const sub = live(sink);
    const fs = frames(6);
    sub.send(fs[0]!.frame, fs[0]!.cursor);
    sink.setBackpressure(true);
    for (const f of fs.slice(1, 4)) sub.send(f.frame, f.cursor); // #2 goes to the sink (returns false), #3-#4 wait
    assert.equal(sink.frames.length, 2);
    assert.ok(sub.queuedBytes > 0);
    assert.equal(sub.cursor, '1002-2');
    sink.setBackpressure(false);
    for (const f of fs.slice(4)) sub.send(f.frame, f.cursor);
    assert.deepEqual(ids(sink), ['1001-1', '1002-2', '1003-3', '1004-4', '1005-5', '1006-6']);
    assert.equal(sub.queuedBytes, 0);
  });

  void test('over its bound: one slow_subscriber error with the resume cursor, then closed', () => {
    const sink = new MemorySseSink();
    const slowSeen: LiveSubscriber[] = [];
    const sub = live(sink, { maxQueuedBytes: 64 * 1024, onSlow: (s) => slowSeen.push(s) });
    sink.setBackpressure(true);
    const fs = frames(40);
    let accepted = 0;
    for (const f of fs) if (sub.send(f.frame, f.cursor)) accepted++;
    assert.ok(accepted < 40);
    assert.equal(sub.closed, true);
    assert.equal(sub.cutOff, true);
    assert.equal(sink.closed, true);
    assert.deepEqual(slowSeen, [sub]);
    const events = parseSse(sink.frames.join(''));
    const last = events.at(-1)!;
    assert.equal(last.event, 'agent_output.error');
    const data = JSON.parse(last.data) as { code: string; cursor: string };
    assert.equal(data.code, 'slow_subscriber');
    assert.equal(data.cursor, events.at(-2)!.id, 'the cursor is the last event the client will have received');
    assert.equal(sub.send(fs[0]!.frame, fs[0]!.cursor), false);
  });

  void test('a client that goes away drops its queue', () => {
    const sink = new MemorySseSink();
    const sub = live(sink);
    let closed = 0;
    sub.onClose(() => closed++);
    sink.setBackpressure(true);
    for (const f of frames(3)) sub.send(f.frame, f.cursor);
    sink.close();
    assert.equal(sub.closed, true);
    assert.equal(sub.queuedBytes, 0);
    assert.equal(closed, 1);
    sub.close();
    assert.equal(closed, 1);
  });

  void test('joining with a replay: live frames published meanwhile follow it without loss or repeats', () => {
    const fs = frames(10);
    const sink = new MemorySseSink();
    // the client resumes after event 2; it subscribes (holding) before the replay is fetched
    const sub = live(sink, { holdLive: true, cursor: fs[1]!.cursor });
    assert.equal(sub.holding, true);
    // live events 5..8 arrive while the actor prepares the replay of 3..6
    for (const f of fs.slice(4, 8)) sub.send(f.frame, f.cursor);
    assert.equal(sink.frames.length, 0);
    const replay = fs.slice(2, 6);
    sub.resumeLive(replay, afterOutputClock(1006));
    for (const f of fs.slice(8)) sub.send(f.frame, f.cursor);
    assert.deepEqual(
      ids(sink),
      fs.slice(2).map((f) => f.cursor),
    );
    assert.equal(sub.holding, false);
  });

  void test('a replay larger than the bound is not mistaken for falling behind; live frames behind it still count', () => {
    const fs = frames(400); // ≈ 2.2 MB of replay frames against a 256 KiB bound
    const sink = new MemorySseSink();
    const sub = live(sink, { holdLive: true, maxQueuedBytes: 256 * 1024 });
    sink.setBackpressure(true);
    sub.resumeLive(fs.slice(0, 300));
    assert.equal(sub.closed, false);
    for (const f of fs.slice(300, 320)) sub.send(f.frame, f.cursor);
    assert.equal(sub.closed, false, '20 live frames fit the bound');
    sink.setBackpressure(false);
    for (const f of fs.slice(320)) sub.send(f.frame, f.cursor);
    assert.deepEqual(
      ids(sink),
      fs.map((f) => f.cursor),
    );
    const stalled = new MemorySseSink();
    const sub2 = live(stalled, { holdLive: true, maxQueuedBytes: 256 * 1024, cursor: 'before' });
    stalled.setBackpressure(true);
    sub2.resumeLive(fs.slice(0, 300));
    for (const f of fs.slice(300)) sub2.send(f.frame, f.cursor);
    assert.equal(sub2.cutOff, true);
  });

  void test("cut off while holding: the error carries the client's own cursor", () => {
    const sink = new MemorySseSink();
    const sub = live(sink, { holdLive: true, maxQueuedBytes: 10_000, cursor: '77-3' });
    for (const f of frames(5)) sub.send(f.frame, f.cursor);
    assert.equal(sub.cutOff, true);
    const events = parseSse(sink.frames.join(''));
    assert.equal(events.length, 1);
    assert.equal((JSON.parse(events[0]!.data) as { cursor: string }).cursor, '77-3');
  });

  void test('fast-check: under any backpressure pattern a subscriber gets an in-order prefix, and is either complete or cut off', () => {
    const fs = frames(60, 1000);
    fc.assert(
      fc.property(
        fc.array(fc.boolean(), { minLength: 60, maxLength: 60 }),
        fc.integer({ min: 0, max: 20_000 }),
        (pressure, maxQueuedBytes) => {
          const sink = new MemorySseSink();
          const sub = live(sink, { maxQueuedBytes });
          fs.forEach((f, i) => {
            if (pressure[i] !== undefined) sink.setBackpressure(pressure[i]);
            sub.send(f.frame, f.cursor);
          });
          sink.setBackpressure(false);
          const events = parseSse(sink.frames.join(''));
          const outputs = events.filter((e) => e.event === 'agent_output').map((e) => e.id);
          assert.deepEqual(
            outputs,
            fs.slice(0, outputs.length).map((f) => f.cursor),
            'an in-order prefix, nothing skipped',
          );
          if (sub.cutOff) {
            assert.equal(events.at(-1)!.event, 'agent_output.error');
            assert.equal(events.filter((e) => e.event === 'agent_output.error').length, 1);
          } else {
            assert.equal(outputs.length, fs.length);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

void describe('SseTopics', () => {
  void test('10 fast subscribers receive everything while 1 stalled one is cut off; the producer never waits', () => {
    const topics = new SseTopics();
    const fast = Array.from({ length: 10 }, () => new MemorySseSink());
    const stalled = new MemorySseSink();
    for (const sink of fast) topics.subscribe('t', live(sink));
    topics.subscribe('t', live(stalled));
    stalled.setBackpressure(true);
    const fs = frames(1000); // ≈ 5.5 MB of frames, far beyond the stalled client's 1 MiB
    const started = process.hrtime.bigint();
    for (const f of fs) topics.publish('t', f.frame, f.cursor);
    const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
    const want = fs.map((f) => f.cursor);
    for (const sink of fast) assert.deepEqual(ids(sink), want);
    assert.equal(stalled.closed, true);
    const stalledEvents = parseSse(stalled.frames.join(''));
    assert.equal(stalledEvents.at(-1)!.event, 'agent_output.error');
    assert.match(stalledEvents.at(-1)!.data, /"code":"slow_subscriber"/);
    assert.equal(topics.subscriberCount('t'), 10, 'the cut-off subscriber left the topic');
    assert.ok(elapsedMs < 30_000, `publishing took ${elapsedMs} ms`);
  });

  void test('publish writes the same bytes object to every sink', () => {
    const topics = new SseTopics();
    const written: Uint8Array[] = [];
    class RecordingSink extends MemorySseSink {
      override write(frame: Uint8Array | string): boolean {
        written.push(frame as Uint8Array);
        return super.write(frame);
      }
    }
    const spy = new RecordingSink();
    topics.subscribe('t', live(spy));
    topics.subscribe('t', live(spy));
    const [f] = frames(1);
    assert.equal(topics.publish('t', f!.frame, f!.cursor), 2);
    assert.equal(written.length, 2);
    assert.equal(written[0], f!.frame);
    assert.equal(written[1], f!.frame);
  });

  void test('subscribe/unsubscribe bookkeeping; empty topics are forgotten', () => {
    const topics = new SseTopics();
    const sub = live(new MemorySseSink());
    const off = topics.subscribe('a', sub);
    topics.subscribe('b', sub);
    assert.equal(topics.subscriberCount(), 2);
    assert.equal(topics.has('a'), true);
    off();
    off();
    assert.equal(topics.has('a'), false);
    assert.equal(topics.publish('a', new Uint8Array(1)), 0);
    sub.close();
    assert.equal(topics.subscriberCount(), 0);
    assert.equal(topics.topicCount, 0);
    const closed = live(new MemorySseSink());
    closed.close();
    topics.subscribe('c', closed);
    assert.equal(topics.topicCount, 0);
  });

  void test('closeAll writes a final frame and closes everyone', () => {
    const topics = new SseTopics();
    const sinks = [new MemorySseSink(), new MemorySseSink()];
    sinks.forEach((s, i) => topics.subscribe(`t${i}`, live(s)));
    topics.closeAll(new TextEncoder().encode('event: agent_output.error\ndata: {}\n\n'));
    for (const s of sinks) {
      assert.equal(s.closed, true);
      assert.equal(s.frames.length, 1);
    }
    assert.equal(topics.subscriberCount(), 0);
  });
});
