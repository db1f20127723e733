import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { StreamJsonProgress } from '../../../src/tasks/progress.js';

const T0 = new Date('2026-01-01T00:00:00Z');
const line = (o: unknown): string => `${JSON.stringify(o)}\n`;
const toolUse = (id: string, name: string) =>
  line({
    type: 'assistant',
    message: {
      content: [
        { type: 'text', text: 'working' },
        { type: 'tool_use', id, name, input: { path: 'a.ts' } },
      ],
    },
  });
const toolResult = (id: string) => line({ type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: id, content: 'ok' }] } });

/** A realistic Claude Code stream-json session: init, three tool calls, a final result. */
const SESSION = [
  line({ type: 'system', subtype: 'init', session_id: 's1', tools: ['Read', 'Edit', 'Bash'], model: 'claude-sonnet-4-5' }),
  toolUse('toolu_1', 'Read'),
  toolResult('toolu_1'),
  toolUse('toolu_2', 'Edit'),
  toolResult('toolu_2'),
  toolUse('toolu_3', 'Bash'),
  toolResult('toolu_3'),
  line({ type: 'assistant', message: { content: [{ type: 'text', text: 'Done: fixed the login bug.' }] } }),
  line({ type: 'result', subtype: 'success', is_error: false, num_turns: 4, result: 'Done', total_cost_usd: 0.01 }),
].join('');

describe('StreamJsonProgress', () => {
  test('counts tool calls, tracks the current tool and every byte', () => {
    let t = T0.getTime();
    const p = new StreamJsonProgress(T0, { now: () => new Date((t += 1000)) });
    p.push(Buffer.from(toolUse('toolu_1', 'Read')), 'stdout');
    assert.equal(p.snapshot().current_tool, 'Read');
    assert.equal(p.snapshot().tool_calls, 1);
    p.push(Buffer.from(toolUse('toolu_2', 'Bash')), 'stdout');
    assert.equal(p.snapshot().current_tool, 'Bash');
    p.push(Buffer.from(toolResult('toolu_2')), 'stdout');
    assert.equal(p.snapshot().current_tool, 'Read', 'back to the call still open');
    p.push(Buffer.from(toolResult('toolu_1')), 'stdout');
    assert.equal(p.snapshot().current_tool, null);
    p.push(Buffer.from('warning: something\n'), 'stderr');
    const s = p.snapshot();
    assert.equal(s.tool_calls, 2);
    assert.equal(s.last_activity_at, new Date(T0.getTime() + 5000).toISOString());
  });

  test('a whole session, whatever the chunking, gives the same progress and events', () => {
    const bytes = Buffer.from(SESSION);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: bytes.length }), { maxLength: 30 }), (cuts) => {
        const events: unknown[] = [];
        const p = new StreamJsonProgress(T0, { onEvent: (e) => events.push(e) });
        const points = [...new Set(cuts)].sort((a, b) => a - b);
        let prev = 0;
        for (const c of [...points, bytes.length]) {
          p.push(bytes.subarray(prev, c), 'stdout');
          prev = c;
        }
        p.end();
        const s = p.snapshot();
        assert.equal(s.output_bytes, bytes.length);
        assert.equal(s.tool_calls, 3);
        assert.equal(s.current_tool, null);
        assert.equal(events.length, 9);
      }),
    );
  });

  test('repeated tool_use ids count once; plain text and junk lines are only bytes', () => {
    const p = new StreamJsonProgress(T0);
    p.push(Buffer.from(toolUse('toolu_1', 'Read') + toolUse('toolu_1', 'Read') + 'plain text\n{not json\n[1,2]\n"str"\n'), 'stdout');
    assert.equal(p.snapshot().tool_calls, 1);
  });

  test('a final line without a newline is parsed at end()', () => {
    const p = new StreamJsonProgress(T0);
    p.push(Buffer.from(toolUse('toolu_9', 'Grep').trimEnd()), 'stdout');
    assert.equal(p.snapshot().tool_calls, 0);
    p.end();
    assert.equal(p.snapshot().tool_calls, 1);
  });

  test('over-long lines are skipped without buffering them, and the next line still parses', () => {
    const p = new StreamJsonProgress(T0, { maxLineBytes: 1024 });
    const huge = JSON.stringify({
      type: 'assistant',
      message: { content: [{ type: 'tool_use', id: 'x', name: 'Big', input: 'y'.repeat(5000) }] },
    });
    for (let i = 0; i < huge.length; i += 100) p.push(Buffer.from(huge.slice(i, i + 100)), 'stdout');
    p.push(Buffer.from(`\n${toolUse('toolu_2', 'Edit')}`), 'stdout');
    assert.equal(p.snapshot().tool_calls, 1);
    assert.equal(p.snapshot().current_tool, 'Edit');
  });

  test('a result ends every open call', () => {
    const p = new StreamJsonProgress(T0);
    p.push(Buffer.from(toolUse('a', 'Bash') + line({ type: 'result', subtype: 'error_max_turns' })), 'stdout');
    assert.equal(p.snapshot().current_tool, null);
  });

  test('each tool call is reported started and finished, ids and names only, once per id', () => {
    const seen: unknown[] = [];
    const p = new StreamJsonProgress(T0, { onToolCall: (c) => seen.push(c) });
    const failed = line({
      type: 'user',
      message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: 'boom', is_error: true }] },
    });
    for (const chunk of [
      toolUse('toolu_1', 'Read'),
      toolUse('toolu_1', 'Read'),
      toolResult('toolu_1'),
      toolUse('toolu_2', 'Bash'),
      failed,
      toolResult('toolu_x'),
    ])
      p.push(Buffer.from(chunk), 'stdout');
    assert.deepEqual(seen, [
      { phase: 'started', id: 'toolu_1', name: 'Read', isError: null },
      { phase: 'finished', id: 'toolu_1', name: 'Read', isError: null },
      { phase: 'started', id: 'toolu_2', name: 'Bash', isError: null },
      { phase: 'finished', id: 'toolu_2', name: 'Bash', isError: true },
    ]);
  });
});
