import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseSseText, SseParser, type SseEvent } from '../../../src/client/sse-parser.js';

function parseChunks(chunks: readonly Uint8Array[]): { events: SseEvent[]; retries: number[]; comments: string[] } {
  const events: SseEvent[] = [];
  const retries: number[] = [];
  const comments: string[] = [];
  const p = new SseParser({ onEvent: (e) => events.push(e), onRetry: (ms) => retries.push(ms), onComment: (c) => comments.push(c) });
  for (const c of chunks) p.push(c);
  p.end();
  return { events, retries, comments };
}

describe('SseParser', () => {
  test('reads event, data, id and dispatches on a blank line', () => {
    const events = parseSseText('event: vm\ndata: {"a":1}\nid: 7\n\ndata: plain\n\n');
    assert.deepEqual(events, [
      { event: 'vm', data: '{"a":1}', id: '7' },
      // The id persists; the event type resets to message.
      { event: 'message', data: 'plain', id: '7' },
    ]);
  });

  test('joins data lines with newlines and keeps an empty data line', () => {
    assert.deepEqual(parseSseText('data: one\ndata:\ndata:  two\n\n'), [{ event: 'message', data: 'one\n\n two', id: undefined }]);
  });

  test('accepts CR LF, CR and LF line ends, even mixed', () => {
    assert.deepEqual(parseSseText('data: a\r\ndata: b\rdata: c\n\r\n'), [{ event: 'message', data: 'a\nb\nc', id: undefined }]);
  });

  test('ignores comments, unknown fields, and events without data', () => {
    const out = parseChunks([new TextEncoder().encode(': ping\n\nfoo: bar\nevent: x\n\ndata: y\n\n')]);
    assert.deepEqual(out.events, [{ event: 'message', data: 'y', id: undefined }]);
    assert.deepEqual(out.comments, ['ping']);
  });

  test('retry takes digits only; an id with NUL is ignored', () => {
    const out = parseChunks([new TextEncoder().encode('retry: 2500\nretry: 1s\nid: a\0b\ndata: x\n\n')]);
    assert.deepEqual(out.retries, [2500]);
    assert.equal(out.events[0]?.id, undefined);
  });

  test('a field without a colon has an empty value; an empty id resets the last id', () => {
    assert.deepEqual(parseSseText('id: 5\ndata\n\nid\ndata: z\n\n'), [
      { event: 'message', data: '', id: '5' },
      { event: 'message', data: 'z', id: '' },
    ]);
  });

  test('drops a leading BOM and an unterminated last event', () => {
    assert.deepEqual(parseSseText('\ufeffdata: first\n\ndata: cut off'), [{ event: 'message', data: 'first', id: undefined }]);
  });

  test('starts from an initial last event id', () => {
    const got: SseEvent[] = [];
    const p = new SseParser({ onEvent: (e) => got.push(e) }, '41');
    p.push('data: x\n\n');
    assert.equal(got[0]?.id, '41');
    assert.equal(p.lastEventId, '41');
  });

  test('any chunking of a valid stream yields the same events (bytes split anywhere, UTF-8 included)', () => {
    const text = fc.string({ unit: 'grapheme', maxLength: 20 }).map((s) => s.replace(/[\r\n\0]/g, ''));
    const event = fc.record({
      event: fc.option(fc.constantFrom('message', 'vm', 'agent_output', 'événement'), { nil: undefined }),
      data: fc.array(text, { minLength: 1, maxLength: 3 }),
      id: fc.option(fc.stringMatching(/^[0-9a-z-]{0,8}$/), { nil: undefined }),
      comment: fc.option(text, { nil: undefined }),
    });
    const eol = fc.constantFrom('\n', '\r\n', '\r');
    fc.assert(
      fc.property(fc.array(event, { maxLength: 6 }), eol, fc.array(fc.nat(), { maxLength: 12 }), (events, nl, cuts) => {
        let stream = '';
        for (const e of events) {
          if (e.comment !== undefined) stream += `:${e.comment}${nl}`;
          if (e.event !== undefined) stream += `event: ${e.event}${nl}`;
          if (e.id !== undefined) stream += `id: ${e.id}${nl}`;
          for (const d of e.data) stream += `data: ${d}${nl}`;
          stream += nl;
        }
        const bytes = new TextEncoder().encode(stream);
        const points = [...new Set(cuts.map((c) => (bytes.length === 0 ? 0 : c % (bytes.length + 1))))].sort((a, b) => a - b);
        const chunks: Uint8Array[] = [];
        let at = 0;
        for (const p of [...points, bytes.length]) {
          chunks.push(bytes.subarray(at, p));
          at = p;
        }
        const whole = parseChunks([bytes]);
        const pieces = parseChunks(chunks);
        assert.deepEqual(pieces, whole);
        // And the events are the ones written.
        let lastId: string | undefined;
        const expected = events.map((e) => {
          if (e.id !== undefined) lastId = e.id;
          return { event: e.event ?? 'message', data: e.data.join('\n'), id: lastId };
        });
        assert.deepEqual(whole.events, expected);
      }),
      { numRuns: 500 },
    );
  });
});
