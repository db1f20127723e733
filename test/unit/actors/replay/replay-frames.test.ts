import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { CursorClock, parseOutputCursor } from '../../../../actors/protocol/output-cursor.js';
import { encodeOutputSse } from '../../../../actors/replay/encode.js';
import { LiveOutputEncoder } from '../../../../actors/replay/output-event.js';
import { agentReplaySse, commandReplaySse } from '../../../../actors/replay/replay-frames.js';
import { kEntryOverheadBytes, ReplayRing, type OutputStreamName } from '../../../../actors/replay/replay-ring.js';
import { parseOne } from './sse-parse.js';

const enc = new TextEncoder();

type Parsed = ReturnType<typeof parseOne>;

/** Feeds a command the way its actor would: ring first, then the live frame of each stored chunk. */
function command(agentId: string, commandId: string, clock: CursorClock, opts: { maxBytes?: number } = {}) {
  const ring = new ReplayRing(commandId, opts.maxBytes === undefined ? {} : { maxBytes: opts.maxBytes });
  const live = new LiveOutputEncoder(agentId, commandId);
  const offsets = { stdout: 0, stderr: 0, log: 0 };
  let seq = 0;
  const liveFrames: Parsed[] = [];
  return {
    ring,
    liveFrames,
    out(bytes: Uint8Array, stream: OutputStreamName = 'stdout'): void {
      seq++;
      ring.append({ seq, stream, offset: offsets[stream], timestampMs: 1000 + seq, bytes, clock: clock.next() });
      offsets[stream] += bytes.byteLength;
      const stored = ring.replayFrom(seq - 1, 1).chunks[0];
      if (stored !== undefined) liveFrames.push(parseOne(encodeOutputSse(live.next(stored))));
    },
    skip(n: number): void {
      seq += n;
    },
  };
}

const sha = (frames: Parsed[]): string => {
  const h = createHash('sha256');
  for (const f of frames) h.update(Buffer.from(f.json.data_base64 as string, 'base64'));
  return h.digest('hex');
};
const parseAll = (r: { frames: Array<{ frame: Uint8Array }> }): Parsed[] => r.frames.map((f) => parseOne(f.frame));

void describe('replay frames', () => {
  void test('fast-check: a replay carries the same bytes (sha256) and text as the live stream, from any cursor', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 400 }), fc.array(fc.nat(2000), { maxLength: 30 }), fc.nat(40), (text, cuts, resumeAt) => {
        const bytes = enc.encode(text);
        const c = command('a', 'c', new CursorClock(() => 5));
        const points = [...new Set(cuts.map((x) => x % (bytes.byteLength + 1)))].sort((x, y) => x - y);
        let at = 0;
        for (const p of [...points, bytes.byteLength]) {
          c.out(bytes.slice(at, p));
          at = p;
        }
        const all = parseAll(commandReplaySse('a', c.ring, { afterSeq: 0, limit: 1000 }));
        assert.equal(sha(all), sha(c.liveFrames));
        assert.deepEqual(all.map((f) => [f.id, f.json.text]), c.liveFrames.map((f) => [f.id, f.json.text]));
        assert.ok(all.every((f) => f.event === 'agent_output.replay' && f.json.event_type === 'agent_output.replay'));
        // resume after any event: exactly the events after it
        const k = resumeAt % c.liveFrames.length;
        const cursor = parseOutputCursor(c.liveFrames[k]!.id!)!;
        const rest = parseAll(commandReplaySse('a', c.ring, { afterSeq: cursor.seq, limit: 1000 }));
        assert.deepEqual(rest.map((f) => [f.id, f.json.text]), c.liveFrames.slice(k + 1).map((f) => [f.id, f.json.text]));
      }),
      { numRuns: 200 },
    );
  });

  void test('replay=true gives the newest `limit` chunks, at most 1000, paging a resume', () => {
    const c = command('a', 'c', new CursorClock());
    for (let i = 0; i < 1500; i++) c.out(enc.encode(`line ${i}\n`));
    const tail = commandReplaySse('a', c.ring, { limit: 1000 });
    assert.equal(tail.chunks, 1000);
    assert.equal(tail.frames.length, 1000);
    assert.equal(parseAll(tail)[0]!.json.text, 'line 500\n');
    assert.equal(tail.more, false);
    const first = commandReplaySse('a', c.ring, { afterSeq: 0, limit: 1000 });
    assert.equal(first.more, true);
    const second = commandReplaySse('a', c.ring, { afterSeq: first.last!.seq, limit: 1000 });
    assert.equal(second.chunks, 500);
    assert.equal(second.more, false);
  });

  void test('gaps are announced in place: evicted output first, dropped output where it was', () => {
    const c = command('agent-1', 'cmd-1', new CursorClock(), { maxBytes: 4 * (1 + kEntryOverheadBytes) }); // a gap marker costs an entry too
    c.out(enc.encode('a'));
    c.out(enc.encode('b'));
    c.skip(2); // seqs 3-4 never arrive
    c.out(enc.encode('e'));
    c.out(enc.encode('f'));
    const frames = parseAll(commandReplaySse('agent-1', c.ring, { afterSeq: 0, limit: 100 }));
    assert.deepEqual(
      frames.map((f) => [f.event, f.json.code ?? f.json.text, f.json.from_seq, f.json.to_seq, f.json.reason]),
      [
        ['agent_output.error', 'output_gap', 1, 1, 'evicted'],
        ['agent_output.replay', 'b', undefined, undefined, undefined],
        ['agent_output.error', 'output_gap', 3, 4, 'agent_dropped'],
        ['agent_output.replay', 'e', undefined, undefined, undefined],
        ['agent_output.replay', 'f', undefined, undefined, undefined],
      ],
    );
    // ids increase, and resuming after a gap does not report it again
    const ids = frames.map((f) => parseOutputCursor(f.id!)!);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i]!.clock > ids[i - 1]!.clock || (ids[i]!.clock === ids[i - 1]!.clock && ids[i]!.seq > ids[i - 1]!.seq));
    const afterGap = parseAll(commandReplaySse('agent-1', c.ring, { afterSeq: ids[2]!.seq, limit: 100 }));
    assert.deepEqual(afterGap.map((f) => f.json.text), ['e', 'f']);
  });

  void test('agent-scoped resume: every command of the agent after the cursor, in arrival order', () => {
    const clock = new CursorClock();
    const x = command('agent-1', 'x', clock);
    const y = command('agent-1', 'y', clock);
    x.out(enc.encode('x1'));
    y.out(enc.encode('y1'), 'stderr');
    x.out(enc.encode('x2'));
    y.out(enc.encode('y2'));
    x.out(enc.encode('x3'));
    const cursor = parseOutputCursor(y.liveFrames[0]!.id!)!;
    const r = agentReplaySse('agent-1', [x.ring, y.ring], cursor, 100);
    const frames = parseAll(r);
    assert.deepEqual(frames.map((f) => `${f.json.command_id as string}:${f.json.text as string}`), ['x:x2', 'y:y2', 'x:x3']);
    assert.deepEqual(r.last, parseOutputCursor(x.liveFrames[2]!.id!));
    assert.deepEqual(frames.map((f) => f.id), [x.liveFrames[1]!.id, y.liveFrames[1]!.id, x.liveFrames[2]!.id]);
    assert.deepEqual(agentReplaySse('agent-1', [x.ring, y.ring], r.last!, 100).frames, []);
  });
});
