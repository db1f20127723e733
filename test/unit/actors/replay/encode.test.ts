import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseOutputCursor } from '../../../../actors/protocol/output-cursor.js';
import { encodeOutputSse, encodeOutputWs } from '../../../support/reference-encode.js';
import { LiveOutputEncoder } from '../../../support/reference-output-event.js';
import type { ReplayChunk } from '../../../../actors/replay/replay-ring.js';
import { parseOne } from './sse-parse.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const json = (b: Uint8Array): Record<string, unknown> => JSON.parse(dec.decode(b)) as Record<string, unknown>;

function chunk(seq: number, text: string | Uint8Array, over: Partial<ReplayChunk> = {}): Omit<ReplayChunk, 'carry'> {
  return {
    kind: 'chunk',
    seq,
    stream: 'stdout',
    offset: 0,
    timestampMs: 1_700_000_000_000 + seq,
    clock: 1_700_000_000_000_000 + seq,
    eof: false,
    bytes: typeof text === 'string' ? enc.encode(text) : text,
    ...over,
  };
}

/** Cuts bytes at the given positions into chunks with running offsets. */
function split(bytes: Uint8Array, cuts: number[]): Array<Omit<ReplayChunk, 'carry'>> {
  const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const out: Array<Omit<ReplayChunk, 'carry'>> = [];
  let at = 0;
  for (const p of [...points, bytes.byteLength]) {
    out.push(chunk(out.length + 1, bytes.slice(at, p), { offset: at }));
    at = p;
  }
  return out;
}

void describe('agent_output SSE frames', () => {
  void test("one frame: id = <clock>-<seq>, the spec's exact chunk object, data_base64 the exact bytes", () => {
    const live = new LiveOutputEncoder('agent-7', 'cmd-42');
    const bytes = Uint8Array.from([0x68, 0x69, 0x0a, 0x1b, 0x5b, 0x33, 0x31, 0x6d, 0xe2]);
    const ev = live.next(chunk(1, bytes));
    const frame = parseOne(encodeOutputSse(ev));
    assert.equal(frame.event, 'agent_output');
    assert.equal(frame.id, `1700000000000001-1`);
    assert.deepEqual(parseOutputCursor(frame.id), { clock: 1_700_000_000_000_001, seq: 1 });
    assert.deepEqual(Object.keys(frame.json), [
      'schema',
      'event_type',
      'agent_id',
      'command_id',
      'stream',
      'timestamp_ms',
      'data_base64',
      'text',
    ]);
    assert.deepEqual(frame.json, {
      schema: 'svc.agent_output.v1',
      event_type: 'agent_output',
      agent_id: 'agent-7',
      command_id: 'cmd-42',
      stream: 'stdout',
      timestamp_ms: 1_700_000_000_001,
      data_base64: Buffer.from(bytes).toString('base64'),
      text: 'hi\n\x1b[31m',
    });
    // the trailing lead byte is held (its character may end in the next chunk); at eof it becomes U+FFFD
    const end = live.next(chunk(2, new Uint8Array(0), { offset: bytes.byteLength, eof: true }));
    assert.equal(end.text, '\ufffd');
  });

  void test('replay frames differ only in event name and event_type', () => {
    const ev = new LiveOutputEncoder('a', 'c').next(chunk(3, 'x'));
    const live = parseOne(encodeOutputSse(ev));
    const replay = parseOne(encodeOutputSse(ev, true));
    assert.equal(replay.event, 'agent_output.replay');
    assert.equal(replay.json.event_type, 'agent_output.replay');
    assert.equal(replay.id, live.id);
    assert.deepEqual({ ...replay.json, event_type: 'agent_output' }, live.json);
  });

  void test('a character split across chunks appears whole in the second chunk', () => {
    const live = new LiveOutputEncoder('a', 'c');
    const euro = enc.encode('€'); // e2 82 ac
    assert.equal(live.next(chunk(1, Uint8Array.from([0x61, euro[0]!]))).text, 'a');
    assert.equal(live.next(chunk(2, Uint8Array.from([euro[1]!, euro[2]!, 0x62]), { offset: 2 })).text, '€b');
  });

  void test('streams decode separately; bytes missing before a chunk restart its decoder', () => {
    const live = new LiveOutputEncoder('a', 'c');
    const snow = enc.encode('☃');
    assert.equal(live.next(chunk(1, snow.slice(0, 1))).text, '');
    assert.equal(live.next(chunk(2, 'err', { stream: 'stderr' })).text, 'err');
    assert.equal(live.next(chunk(3, snow.slice(1), { offset: 1 })).text, '☃');
    // offset jump (agent dropped output): held bytes are not glued to unrelated bytes
    assert.equal(live.next(chunk(4, snow.slice(0, 2), { offset: 3 })).text, '');
    assert.equal(live.next(chunk(5, Uint8Array.from([0x41]), { offset: 100 })).text, 'A');
  });

  void test('fast-check: random UTF-8 split at random byte positions: texts and bytes reassemble exactly', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 200 }),
        fc.array(fc.nat(2000), { maxLength: 40 }),
        fc.boolean(),
        (s, cuts, eof) => {
          const bytes = enc.encode(s);
          const original = dec.decode(bytes); // lone surrogates are U+FFFD in UTF-8
          const chunks = split(bytes, cuts);
          if (eof) chunks.push(chunk(chunks.length + 1, new Uint8Array(0), { offset: bytes.byteLength, eof: true }));
          const live = new LiveOutputEncoder('a', 'c');
          const events = chunks.map((c) => live.next(c));
          assert.equal(events.map((e) => e.text).join(''), original);
          assert.deepEqual(Buffer.concat(events.map((e) => Buffer.from(e.dataBase64, 'base64'))), Buffer.from(bytes));
          // each SSE frame is one event whose text/data agree with the event
          for (const e of events) {
            const f = parseOne(encodeOutputSse(e));
            assert.equal(f.json.text, e.text);
            assert.equal(f.json.data_base64, e.dataBase64);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

void describe('WebSocket messages (spec 4.18)', () => {
  void test('output: the spec fields plus seq and cursor', () => {
    const ev = new LiveOutputEncoder('agent-1', 'cmd-9').next(chunk(4, 'ok', { stream: 'stderr' }));
    assert.deepEqual(json(encodeOutputWs(ev)), {
      type: 'output',
      agent_id: 'agent-1',
      stream_id: 'cmd-9',
      stream_type: 'stderr',
      data: Buffer.from('ok').toString('base64'),
      timestamp: 1_700_000_000_004,
      seq: 4,
      cursor: '1700000000000004-4',
    });
  });
});
