import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ChatProgressTracker } from '../../../../actors/chat/progress.js';
import { ChatProjector } from '../../../../actors/chat/projector.js';
import { repoRoot } from '../../../support/paths.js';

const enc = new TextEncoder();

void describe('ChatProgressTracker', () => {
  void test('counts tools, tracks the running one, and records how the run finished', () => {
    const p = new ChatProjector({ sessionId: 's', commandId: 'c' });
    const t = new ChatProgressTracker();
    const feed = (obj: unknown, nowMs: number) => {
      const bytes = enc.encode(JSON.stringify(obj) + '\n');
      t.observeBytes(bytes.byteLength, nowMs);
      t.observe(p.push(bytes), nowMs);
    };
    feed({ type: 'system', subtype: 'init', model: 'claude-x' }, 1);
    feed({ type: 'assistant', message: { content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: {} }] } }, 2);
    assert.equal(t.snapshot().currentTool, 'Bash');
    feed({ type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 't1', is_error: true, content: 'boom' }] } }, 3);
    assert.equal(t.snapshot().currentTool, null);
    feed({ type: 'result', subtype: 'success', total_cost_usd: 0.5 }, 4);
    const s = t.snapshot();
    assert.deepEqual({ ...s, outputBytes: 0 }, { toolCalls: 1, toolErrors: 1, currentTool: null, lastActivityMs: 4, outputBytes: 0, finished: true, finishReason: 'stop', costUsd: 0.5, model: 'claude-x' });
    assert.ok(s.outputBytes > 100);
  });

  void test('over a recorded session', () => {
    const bytes = readFileSync(join(repoRoot, 'test', 'fixtures', 'stream-json', 'fix-failing-test.ndjson'));
    const p = new ChatProjector({ sessionId: 's', commandId: 'c' });
    const t = new ChatProgressTracker();
    t.observeBytes(bytes.byteLength, 10);
    t.observe(p.push(bytes), 10);
    const s = t.snapshot();
    assert.equal(s.toolCalls, 5);
    assert.equal(s.toolErrors, 1);
    assert.equal(s.finishReason, 'stop');
    assert.equal(s.costUsd, 0.08421345);
    assert.equal(s.outputBytes, bytes.byteLength);
  });
});
