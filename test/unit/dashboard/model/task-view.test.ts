import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import {
  ACTIVE_TASK_STATES,
  describeTaskEvent,
  EXAMPLE_MANIFEST,
  LogBuffer,
  taskStateFilter,
} from '../../../../src/dashboard/model/task-view.js';
import { TASK_STATES } from '../../../../src/dashboard/model/badges.js';

describe('dashboard task view', () => {
  test('the state filter', () => {
    assert.equal(taskStateFilter(''), undefined);
    assert.deepEqual(taskStateFilter('active'), [...ACTIVE_TASK_STATES]);
    assert.deepEqual(taskStateFilter('running,failed,bogus'), ['running', 'failed']);
    assert.equal(taskStateFilter('bogus'), undefined);
    for (const s of ACTIVE_TASK_STATES) assert.ok(TASK_STATES.includes(s));
  });

  test('the example manifest has the required fields', () => {
    const m = parse(EXAMPLE_MANIFEST) as { name: string; repository: { url: string }; prompt: string };
    assert.ok(m.name !== '' && m.repository.url.startsWith('https://') && m.prompt.length > 0);
  });

  test('log chunks become lines; a partial line waits for the rest of its stream', () => {
    const b = new LogBuffer();
    assert.deepEqual(b.push('stdout', 'hel'), []);
    assert.deepEqual(b.pending, { stream: 'stdout', text: 'hel' });
    assert.deepEqual(b.push('stdout', 'lo\nwor'), [{ stream: 'stdout', text: 'hello' }]);
    // Another stream ends the open line.
    assert.deepEqual(b.push('stderr', 'oops\n'), [
      { stream: 'stdout', text: 'wor' },
      { stream: 'stderr', text: 'oops' },
    ]);
    assert.deepEqual(b.push('stdout', 'tail'), []);
    assert.deepEqual(b.flush(), [{ stream: 'stdout', text: 'tail' }]);
    assert.equal(b.lines.length, 4);
  });

  test('the buffer is bounded by characters', () => {
    const b = new LogBuffer(100);
    for (let i = 0; i < 50; i++) b.push('stdout', `line ${i} ${'x'.repeat(10)}\n`);
    const chars = b.lines.reduce((n, l) => n + l.text.length + 1, 0);
    assert.ok(chars <= 100, String(chars));
    assert.ok(b.droppedChars > 0);
    assert.match(b.lines[b.lines.length - 1]?.text ?? '', /^line 49/);
  });

  test('structured log events read as sentences; unknown ones stay JSON', () => {
    assert.equal(
      describeTaskEvent({ kind: 'state', from: 'pending', to: 'staging', message: 'cloning x' }),
      '▸ staging (from pending) — cloning x',
    );
    assert.equal(describeTaskEvent({ kind: 'state', from: null, to: 'pending', message: 'task accepted' }), '▸ pending — task accepted');
    assert.equal(describeTaskEvent({ kind: 'workspace', path: '/w', commit: 'c19708b3ee053b35' }), '▸ workspace /w at commit c19708b3ee05');
    assert.equal(
      describeTaskEvent({ kind: 'command_exited', exit_code: 137, killed: true, timed_out_by: 'lifecycle' }),
      '▸ the command exited with code 137 (killed by the lifecycle timeout)',
    );
    assert.equal(describeTaskEvent({ kind: 'stream_json', event: { type: 'x' } }), '{"kind":"stream_json","event":{"type":"x"}}');
    assert.equal(describeTaskEvent('plain'), 'plain');
  });
});
