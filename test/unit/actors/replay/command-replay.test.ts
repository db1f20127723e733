/**
 * The per-command replay state (actors/replay/command-replay.ts): a chunk's publish payload holds
 * exactly the frames the reference encoder builds (test/support/reference-encode.ts: SSE
 * agent_output and WS output), a replay is exactly the `agent_output.replay` frames, also when
 * it comes from the cache, gaps (dropped and evicted) are events, the raw bytes come back out of
 * the stored events, and an agent-scoped replay merges commands by clock.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { agentReplay, CommandReplay, EventCache } from '../../../../actors/replay/command-replay.js';
import { encodeChunkSse, encodeChunkWs } from '../../../../actors/protocol/chunk-events.js';
import { encodeOutputSse, encodeOutputWs } from '../../../support/reference-encode.js';
import { LiveOutputEncoder } from '../../../support/reference-output-event.js';
import { decodeOutputPublish, kPublishEnd, kPublishGap } from '../../../../actors/protocol/publish-frames.js';
import { ReplayBudget } from '../../../../actors/replay/replay-budget.js';
import type { OutputStreamName } from '../../../../actors/replay/replay-types.js';
import { parseSse } from './sse-parse.js';

const dec = new TextDecoder();
const enc = new TextEncoder();

interface In {
  seq: number;
  stream: OutputStreamName;
  offset: number;
  bytes: Uint8Array;
  clock: number;
}

/** Feeds chunks (offsets running per stream) to a CommandReplay and to the reference encoder. */
function feed(
  r: CommandReplay,
  texts: Array<[OutputStreamName, Uint8Array | string]>,
  firstClock = 1_700_000_000_000_000,
): { inputs: In[]; payloads: Array<{ sse: Uint8Array; ws: Uint8Array }>; reference: { sse: string[]; ws: string[]; replay: string[] } } {
  const ref = new LiveOutputEncoder(r.agentId, r.commandId);
  const refReplay = new LiveOutputEncoder(r.agentId, r.commandId);
  const offsets = new Map<string, number>();
  const inputs: In[] = [];
  const payloads: Array<{ sse: Uint8Array; ws: Uint8Array }> = [];
  const reference = { sse: [] as string[], ws: [] as string[], replay: [] as string[] };
  texts.forEach(([stream, t], i) => {
    const bytes = typeof t === 'string' ? enc.encode(t) : t;
    const offset = offsets.get(stream) ?? 0;
    offsets.set(stream, offset + bytes.byteLength);
    const input: In = { seq: i + 1, stream, offset, bytes, clock: firstClock + i };
    inputs.push(input);
    const live = { ...input, timestampMs: 1_700_000_000_000 + i, eof: false };
    const carry = r.chunk(live, input.clock);
    assert.ok(carry !== null);
    // What the fanout encodes on the main thread from the one frame that crossed.
    const facts = { ...live, agentId: r.agentId, commandId: r.commandId, carry };
    payloads.push({ sse: encodeChunkSse(facts), ws: encodeChunkWs(facts) });
    const chunk = {
      kind: 'chunk' as const,
      seq: input.seq,
      stream,
      offset,
      timestampMs: 1_700_000_000_000 + i,
      clock: input.clock,
      eof: false,
      bytes,
    };
    const ev = ref.next(chunk);
    reference.sse.push(dec.decode(encodeOutputSse(ev)));
    reference.ws.push(dec.decode(encodeOutputWs(ev)));
    reference.replay.push(dec.decode(encodeOutputSse(refReplay.next(chunk), true)));
  });
  return { inputs, payloads, reference };
}

void describe('CommandReplay', () => {
  void test('a chunk is stored raw; its live SSE and WS frames, encoded from what crossed, are those of the reference encoder', () => {
    const r = new CommandReplay('agent-7', 'cmd-42', { ringBytes: 1 << 20 });
    const { payloads, reference } = feed(r, [
      ['stdout', 'hello\r\n\x1b[31mred\x1b[0m "q" \\'],
      ['stderr', Uint8Array.from([0xe2, 0x82])],
      ['stderr', Uint8Array.from([0xac, 0x0a])],
      ['stdout', Uint8Array.from([0xff, 0x41])],
    ]);
    payloads.forEach((p, i) => {
      assert.equal(dec.decode(p.sse), reference.sse[i]);
      assert.equal(dec.decode(p.ws), reference.ws[i]);
    });
    assert.equal(r.ring.lastSeq, 4);
  });

  void test('a replay is the agent_output.replay frames, newest `limit` or after a seq, with the live text', () => {
    const r = new CommandReplay('a', 'c', { ringBytes: 1 << 20 });
    const { reference } = feed(
      r,
      Array.from({ length: 12 }, (_, i): [OutputStreamName, string] => [i % 3 === 0 ? 'stderr' : 'stdout', `line ${i} ✓\n`]),
    );
    const all = r.replay({ limit: 1000 });
    assert.equal(dec.decode(all.bytes), reference.replay.join(''));
    assert.equal(all.chunks, 12);
    assert.equal(all.more, false);
    const tail = r.replay({ limit: 3 });
    assert.equal(dec.decode(tail.bytes), reference.replay.slice(-3).join(''));
    const after = r.replay({ afterSeq: 5, limit: 4 });
    assert.equal(dec.decode(after.bytes), reference.replay.slice(5, 9).join(''));
    assert.equal(after.more, true);
    assert.equal(after.last, parseSse(reference.replay[8]!)[0]!.id);
    const stderr = r.replay({ limit: 1000, stream: 'stderr' });
    assert.equal(stderr.chunks, 4);
  });

  void test('gaps: dropped seqs and evicted output are output_gap events; the end is stream_end', () => {
    const budget = new ReplayBudget({ maxBytes: 1 << 30 });
    const r = new CommandReplay('a', 'c', { ringBytes: 3 * 400, budget });
    r.chunk({ seq: 1, stream: 'stdout', offset: 0, timestampMs: 1, eof: false, bytes: enc.encode('one\n') }, 10);
    const gap = r.gap({ firstSeq: 2, lastSeq: 3, lostBytes: 99, timestampMs: 2 }, 11)!;
    const g = decodeOutputPublish(gap)!;
    assert.equal(g.flags, kPublishGap);
    assert.equal(g.stream, undefined, 'a gap concerns every stream');
    const ev = parseSse(dec.decode(g.sse))[0]!;
    assert.equal(ev.event, 'agent_output.error');
    assert.deepEqual(JSON.parse(ev.data), {
      schema: 'svc.agent_output.v1',
      event_type: 'agent_output.error',
      code: 'output_gap',
      message: 'output seq 2-3 of command c was dropped by the agent',
      agent_id: 'a',
      command_id: 'c',
      from_seq: 2,
      to_seq: 3,
      reason: 'agent_dropped',
      lost_bytes: 99,
      cursor: '11-3',
    });
    for (let seq = 4; seq <= 8; seq++)
      r.chunk({ seq, stream: 'stdout', offset: seq * 10, timestampMs: seq, eof: false, bytes: enc.encode(`line ${seq}\n`) }, 10 + seq);
    const page = r.replay({ limit: 1000 });
    const events = parseSse(dec.decode(page.bytes));
    assert.equal(events[0]!.event, 'agent_output.error');
    assert.equal(JSON.parse(events[0]!.data).reason, 'evicted');
    assert.ok(events.slice(1).every((e) => e.event === 'agent_output.replay'));
    assert.equal(page.events, events.length);
    assert.equal(page.chunks, events.length - 1);
    const end = decodeOutputPublish(r.end(3, 1000))!;
    assert.equal(end.flags, kPublishEnd);
    assert.equal(end.cursor, undefined);
    assert.equal(JSON.parse(parseSse(dec.decode(end.sse))[0]!.data).exit_code, 3);
    assert.ok(r.finished);
    r.ring.release();
    assert.equal(budget.usedBytes, 0, 'a released ring gives its bytes back');
  });

  void test('fast-check: the raw bytes come back out of the ring, and a replay repeats the live text', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 200 }), { minLength: 1, maxLength: 20 }), (chunks) => {
        const r = new CommandReplay('a', 'c', { ringBytes: 1 << 22 });
        let offset = 0;
        chunks.forEach((bytes, i) => {
          r.chunk({ seq: i + 1, stream: 'stdout', offset, timestampMs: i, eof: false, bytes }, i + 1);
          offset += bytes.byteLength;
        });
        const back = [...r.rawChunks('stdout')].map((c) => Buffer.from(c.bytes));
        assert.deepEqual(Buffer.concat(back), Buffer.concat(chunks.map((c) => Buffer.from(c))));
        const replayed = parseSse(dec.decode(r.replay({ limit: 1000 }).bytes)).map((e) => (JSON.parse(e.data) as { text: string }).text);
        const ref = new LiveOutputEncoder('a', 'c');
        let at = 0;
        const reference = chunks.map((bytes, i) => {
          const ev = ref.next({ kind: 'chunk', seq: i + 1, stream: 'stdout', offset: at, timestampMs: i, clock: i + 1, eof: false, bytes });
          at += bytes.byteLength;
          return ev.text;
        });
        assert.deepEqual(replayed, reference);
      }),
      { numRuns: 100 },
    );
  });

  void test('a replay of cached events is the same bytes as the first, also when the tail moves and the cache is full', () => {
    // A cache that holds about two replays of 50 chunks: the third command's replay pushes the first out.
    const events = new EventCache(2 * 50 * 400);
    const text = (c: number, seq: number): string => `${'x'.repeat(200)} command ${c} line ${seq}\n`;
    const replays = [1, 2, 3].map((c) => new CommandReplay('a', `c${c}`, { ringBytes: 1 << 22, events }));
    const fill = (r: CommandReplay, c: number, from: number, to: number): void => {
      for (let seq = from; seq <= to; seq++) {
        const bytes = enc.encode(text(c, seq));
        r.chunk({ seq, stream: 'stdout', offset: (seq - 1) * bytes.byteLength, timestampMs: seq, eof: false, bytes }, 1000 * c + seq);
      }
    };
    const texts = (bytes: Uint8Array): string[] => parseSse(dec.decode(bytes)).map((e) => (JSON.parse(e.data) as { text: string }).text);
    for (const [i, r] of replays.entries()) {
      const c = i + 1;
      fill(r, c, 1, 50);
      const cold = Buffer.from(r.replay({ limit: 50 }).bytes);
      const warm = r.replay({ limit: 50 });
      assert.deepEqual(Buffer.from(warm.bytes), cold, 'a warm replay repeats the cold one byte for byte');
      assert.equal(warm.lease, undefined, 'a replay of events cached together is a view of them, nothing lent');
      fill(r, c, 51, 55);
      const moved = r.replay({ limit: 50 });
      assert.deepEqual(
        texts(moved.bytes),
        Array.from({ length: 50 }, (_, k) => text(c, k + 6)),
      );
      assert.equal(moved.last, `${1000 * c + 55}-55`);
      assert.ok(events.bytes <= events.maxBytes, `the cache stays within its bound (${events.bytes} bytes)`);
    }
    // The first command's events were dropped: its replay encodes them again, the same bytes.
    const again = replays[0]!.replay({ afterSeq: 5, limit: 50 });
    assert.deepEqual(
      texts(again.bytes),
      Array.from({ length: 50 }, (_, k) => text(1, k + 6)),
    );
  });

  void test('a repeated replay of an unchanged command answers the same; any change to the ring or the cache is seen', () => {
    const events = new EventCache(60 * 400);
    const text = (c: number, seq: number): string => `${'y'.repeat(200)} command ${c} line ${seq}\n`;
    const fill = (r: CommandReplay, c: number, from: number, to: number): void => {
      for (let seq = from; seq <= to; seq++) {
        const bytes = enc.encode(text(c, seq));
        r.chunk({ seq, stream: 'stdout', offset: (seq - 1) * bytes.byteLength, timestampMs: seq, eof: false, bytes }, 1000 * c + seq);
      }
    };
    const texts = (bytes: Uint8Array): string[] =>
      parseSse(dec.decode(bytes))
        .filter((e) => e.event === 'agent_output.replay')
        .map((e) => (JSON.parse(e.data) as { text: string }).text);
    const lines = (c: number, from: number, n: number): string[] => Array.from({ length: n }, (_, k) => text(c, from + k));
    const r = new CommandReplay('a', 'c1', { ringBytes: 1 << 22, events });
    fill(r, 1, 1, 40);
    const first = Buffer.from(r.replay({ limit: 40 }).bytes);
    for (let i = 0; i < 3; i++) {
      const again = r.replay({ limit: 40 });
      assert.deepEqual(Buffer.from(again.bytes), first, `replay ${i + 2} repeats the first byte for byte`);
      assert.equal(again.last, '1040-40');
      assert.equal(again.chunks, 40);
    }
    assert.deepEqual(texts(r.replay({ limit: 40, stream: 'stderr' }).bytes), [], 'another stream filter is another question');
    assert.deepEqual(texts(r.replay({ limit: 10 }).bytes), lines(1, 31, 10), 'another limit is another question');
    assert.deepEqual(texts(r.replay({ afterSeq: 35, limit: 40 }).bytes), lines(1, 36, 5));
    // New output: the tail moves.
    fill(r, 1, 41, 42);
    assert.deepEqual(texts(r.replay({ limit: 40 }).bytes), lines(1, 3, 40));
    // Lost output: the gap is in the answer.
    r.gap({ firstSeq: 43, lastSeq: 44, lostBytes: 10, timestampMs: 43 }, 1043);
    for (let i = 0; i < 2; i++) {
      const afterGap = r.replay({ afterSeq: 42, limit: 40 });
      assert.deepEqual(
        parseSse(dec.decode(afterGap.bytes)).map((e) => e.event),
        ['agent_output.error'],
        'the dropped seqs are an output_gap event',
      );
      assert.equal(afterGap.last, '1043-44');
    }
    // Another command's replays push this one's events out of the cache: asked again, the same answer, encoded anew.
    const before = Buffer.from(r.replay({ limit: 40 }).bytes);
    const other = new CommandReplay('a', 'c2', { ringBytes: 1 << 22, events });
    fill(other, 2, 1, 60);
    other.replay({ limit: 60 });
    assert.deepEqual(Buffer.from(r.replay({ limit: 40 }).bytes), before);
    assert.ok(events.bytes <= events.maxBytes, `the cache stays within its bound (${events.bytes} bytes)`);
  });

  void test('an agent-scoped replay merges the commands by clock, after the cursor', () => {
    const a = new CommandReplay('ag', 'c1', { ringBytes: 1 << 20 });
    const b = new CommandReplay('ag', 'c2', { ringBytes: 1 << 20 });
    let clock = 100;
    for (let i = 1; i <= 3; i++) {
      a.chunk({ seq: i, stream: 'stdout', offset: i, timestampMs: i, eof: false, bytes: enc.encode(`a${i}`) }, clock++);
      b.chunk({ seq: i, stream: 'stdout', offset: i, timestampMs: i, eof: false, bytes: enc.encode(`b${i}`) }, clock++);
    }
    const page = agentReplay([a, b], { clock: 101, seq: 1 }, 1000);
    const events = parseSse(dec.decode(page.bytes));
    assert.deepEqual(
      events.map((e) => e.id),
      ['102-2', '103-2', '104-3', '105-3'],
    );
    assert.deepEqual(
      events.map((e) => (JSON.parse(e.data) as { text: string }).text),
      ['a2', 'b2', 'a3', 'b3'],
    );
    assert.equal(page.last, '105-3');
  });
});
