import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { chatErrorEvent, encodeChatSse, parseChatCursor, type ChatEvent } from '../../../../actors/protocol/chat-events.js';
import { ChatProjector } from '../../../../actors/chat/projector.js';
import { parseOne } from '../replay/sse-parse.js';

const enc = new TextEncoder();
const lines = (...objs: unknown[]): Uint8Array =>
  enc.encode(objs.map((o) => (typeof o === 'string' ? o : JSON.stringify(o))).join('\n') + '\n');
const summary = (evs: ChatEvent[]) => evs.map((e) => [e.id, e.event]);

function projector(maxLineBytes?: number): ChatProjector {
  return new ChatProjector(
    maxLineBytes === undefined ? { sessionId: 's-1', commandId: 'c-1' } : { sessionId: 's-1', commandId: 'c-1', maxLineBytes },
  );
}

void describe('ChatProjector', () => {
  void test('ids are {session}-{seq} with a monotonic seq; every data object has session_id and raw_ref', () => {
    const p = projector();
    const evs = p.push(
      lines({ type: 'system', subtype: 'init', model: 'm-1' }, '', {
        type: 'assistant',
        message: { content: [{ type: 'text', text: 'hi' }] },
      }),
    );
    assert.deepEqual(summary(evs), [
      ['s-1-1', 'status'],
      ['s-1-2', 'delta'],
    ]);
    assert.deepEqual(evs[1]!.data, {
      session_id: 's-1',
      raw_ref: { command_id: 'c-1', line: 3 },
      role: 'assistant',
      kind: 'message',
      content: 'hi',
    });
    assert.equal(p.seq, 2);
    assert.equal(p.model, 'm-1');
  });

  void test('a result ends the projection; later output produces nothing', () => {
    const p = projector();
    const evs = p.push(
      lines({ type: 'result', subtype: 'error_max_turns', is_error: false, num_turns: 30 }, 'trailing garbage', { type: 'system' }),
    );
    assert.deepEqual(summary(evs), [['s-1-1', 'done']]);
    assert.equal(evs[0]!.data.finish_reason, 'error', 'a subtype other than success is an error');
    assert.equal(evs[0]!.data.model, null);
    assert.equal(evs[0]!.data.usage, null);
    assert.equal(p.terminated, true);
    assert.deepEqual(p.end(), []);
    assert.deepEqual(p.interrupt('STREAM_INTERRUPTED', 'x'), []);
  });

  void test('a last line without a line break is parsed at the end when it is complete JSON, else kept raw', () => {
    const p = projector();
    assert.deepEqual(p.push(enc.encode('{"type":"result","subtype":"success"}')), []);
    assert.deepEqual(summary(p.end()), [['s-1-1', 'done']]);
    const q = projector();
    q.push(enc.encode('{"type":"assis'));
    const evs = q.end();
    assert.deepEqual(summary(evs), [
      ['s-1-1', 'raw'],
      ['s-1-2', 'error'],
    ]);
    assert.equal(evs[0]!.data.content, '{"type":"assis');
    assert.equal(evs[1]!.data.code, 'NO_RESULT');
  });

  void test('CRLF and whitespace-only lines; raw keeps the line as printed', () => {
    const p = projector();
    const evs = p.push(enc.encode('{"type":"system","subtype":"init"}\r\n \t\r\nnot json\r\n'));
    assert.deepEqual(summary(evs), [
      ['s-1-1', 'status'],
      ['s-1-2', 'raw'],
    ]);
    assert.equal(evs[1]!.data.content, 'not json');
    assert.deepEqual(evs[1]!.data.raw_ref, { command_id: 'c-1', line: 3 });
  });

  void test('a huge line is cut at the cap and becomes a truncated raw event; memory stays bounded', () => {
    const p = projector(1024);
    const big = '{"type":"assistant","text":"' + 'é'.repeat(5000) + '"}';
    const bytes = enc.encode(big + '\n{"type":"result"}\n');
    const evs: ChatEvent[] = [];
    for (let i = 0; i < bytes.byteLength; i += 100) evs.push(...p.push(bytes.subarray(i, i + 100)));
    assert.deepEqual(summary(evs), [
      ['s-1-1', 'raw'],
      ['s-1-2', 'done'],
    ]);
    const content = evs[0]!.data.content as string;
    assert.equal(evs[0]!.data.truncated, true);
    assert.ok(enc.encode(content).byteLength <= 1024);
    assert.ok(!content.includes('\ufffd'), 'cut at a character boundary');
    assert.ok(big.startsWith(content));
  });

  void test('tool results: text blocks joined, images marked, missing ids are null', () => {
    const p = projector();
    const evs = p.push(
      lines({
        type: 'user',
        message: {
          content: [
            {
              type: 'tool_result',
              content: [
                { type: 'text', text: 'a' },
                { type: 'image', source: {} },
                { type: 'text', text: 'b' },
              ],
            },
            { type: 'text', text: 'prompt echo' },
          ],
        },
      }),
    );
    assert.deepEqual(summary(evs), [['s-1-1', 'tool_result']]);
    assert.equal(evs[0]!.data.content, 'a\n[image]\nb');
    assert.equal(evs[0]!.data.tool_id, null);
    assert.equal(evs[0]!.data.status, 'ok');
  });

  void test('messages without content, unknown types and non-objects are raw', () => {
    const p = projector();
    const evs = p.push(lines({ type: 'assistant' }, { type: 'user', message: {} }, { type: 'mystery' }, 'null', '42'));
    assert.deepEqual(
      evs.map((e) => e.event),
      ['raw', 'raw', 'raw', 'raw', 'raw'],
    );
  });

  void test('deterministic: re-projecting the same bytes gives the same ids, so a resume skips seq <= cursor', () => {
    const bytes = lines(
      { type: 'system', subtype: 'init' },
      {
        type: 'assistant',
        message: {
          content: [
            { type: 'text', text: 'a' },
            { type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'ls' } },
          ],
        },
      },
      { type: 'result', subtype: 'success' },
    );
    const first = projector().push(bytes);
    const again = projector().push(bytes);
    assert.deepEqual(again, first);
    const cursor = parseChatCursor(first[1]!.id)!;
    assert.deepEqual(cursor, { sessionId: 's-1', seq: 2 });
    assert.deepEqual(
      again.filter((e) => e.seq > cursor.seq).map((e) => e.id),
      ['s-1-3', 's-1-4'],
    );
  });

  void test('interrupt ends the stream with the given code', () => {
    const p = projector();
    p.push(lines({ type: 'system' }));
    const evs = p.interrupt('STREAM_INTERRUPTED', 'the subscriber fell behind');
    assert.deepEqual(summary(evs), [['s-1-2', 'error']]);
    assert.equal(evs[0]!.data.code, 'STREAM_INTERRUPTED');
  });
});

void describe('chat SSE frames and cursors', () => {
  void test('encodeChatSse: id, event name, one-line JSON data', () => {
    const [ev] = projector().push(lines({ type: 'assistant', message: { content: [{ type: 'text', text: 'line one\nline two\r\n' }] } }));
    const f = parseOne(encodeChatSse(ev!));
    assert.equal(f.id, 's-1-1');
    assert.equal(f.event, 'delta');
    assert.equal(f.json.content, 'line one\nline two\r\n');
  });

  void test('STREAM_INTERRUPTED frame for an unknown command', () => {
    const f = parseOne(encodeChatSse(chatErrorEvent('sess-x', 'cmd-gone', 1, 'STREAM_INTERRUPTED', 'unknown or expired command')));
    assert.equal(f.id, 'sess-x-1');
    assert.equal(f.event, 'error');
    assert.deepEqual(f.json, {
      session_id: 'sess-x',
      raw_ref: { command_id: 'cmd-gone', line: 0 },
      role: 'system',
      kind: 'error',
      error: 'unknown or expired command',
      code: 'STREAM_INTERRUPTED',
    });
  });

  void test('parseChatCursor splits at the last dash', () => {
    assert.deepEqual(parseChatCursor('3f6c1b2a-8d4e-4f7a-9b1c-2e5d7a9c0f13-17'), {
      sessionId: '3f6c1b2a-8d4e-4f7a-9b1c-2e5d7a9c0f13',
      seq: 17,
    });
    for (const bad of ['', '17', '-17', 'abc-', 'abc-1x', 'abc-1.5']) assert.equal(parseChatCursor(bad), null, bad);
  });
});
