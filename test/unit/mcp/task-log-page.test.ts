import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { readTaskLogPage, type TaskLogSource } from '../../../src/mcp/task-log-page.js';
import { TaskLog } from '../../../src/tasks/task-log.js';

void describe('read_task_log pages (a real TaskLog file)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mcp-task-log-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  function source(log: TaskLog, state: { state: string }): TaskLogSource {
    return {
      get: (id) => {
        if (id !== 'task-1') throw new SvcError('task.not_found', `no task ${id}`);
        return { state: state.state, exit_code: null, error: null };
      },
      taskLog: () => log,
    };
  }

  void test('pages by seq within the record and byte bounds; end_of_log only once the task finished', async () => {
    const log = new TaskLog({ path: join(dir, 'a', 'log.ndjson') });
    const state = { state: 'running' };
    for (let i = 1; i <= 5; i++) log.append('stdout', `line-${i}\n`);
    const first = await readTaskLogPage(source(log, state), { taskId: 'task-1', afterSeq: 0, maxRecords: 2, maxBytes: 1024 });
    assert.deepEqual(
      first.records.map((r) => r.data),
      ['line-1\n', 'line-2\n'],
    );
    assert.equal(first.next_after_seq, 2);
    assert.equal(first.end_of_log, false);
    const rest = await readTaskLogPage(source(log, state), { taskId: 'task-1', afterSeq: 2, maxRecords: 100, maxBytes: 1024 });
    assert.deepEqual(
      rest.records.map((r) => r.seq),
      [3, 4, 5],
    );
    assert.equal(rest.end_of_log, false, 'still running: more may come');
    log.finish('completed', '0');
    state.state = 'completed';
    const last = await readTaskLogPage(source(log, state), { taskId: 'task-1', afterSeq: 5, maxRecords: 100, maxBytes: 1024 });
    assert.deepEqual(
      last.records.map((r) => [r.event, r.data]),
      [['completed', '0']],
    );
    assert.equal(last.end_of_log, true);
    assert.equal(last.state, 'completed');
    await log.close();
  });

  void test('a record larger than the byte bound comes alone, cut and marked; the byte bound splits pages', async () => {
    const log = new TaskLog({ path: join(dir, 'b', 'log.ndjson') });
    log.append('stdout', 'x'.repeat(5000));
    log.append('stdout', 'small\n');
    log.finish('completed', '0');
    const src = source(log, { state: 'completed' });
    const p1 = await readTaskLogPage(src, { taskId: 'task-1', afterSeq: 0, maxRecords: 10, maxBytes: 1024 });
    assert.equal(p1.records.length, 1);
    assert.equal(p1.records[0]?.data.length, 1024);
    assert.equal(p1.records[0]?.cut, true);
    assert.equal(p1.end_of_log, false);
    const p2 = await readTaskLogPage(src, { taskId: 'task-1', afterSeq: p1.next_after_seq, maxRecords: 10, maxBytes: 1024 });
    assert.deepEqual(
      p2.records.map((r) => r.data),
      ['small\n', '0'],
    );
    assert.equal(p2.end_of_log, true);
    await log.close();
  });

  void test('an unknown task is task.not_found', async () => {
    const log = new TaskLog({ path: join(dir, 'c', 'log.ndjson') });
    await assert.rejects(
      readTaskLogPage(source(log, { state: 'running' }), { taskId: 'task-2', afterSeq: 0, maxRecords: 1, maxBytes: 1024 }),
      (err: unknown) => err instanceof SvcError && err.code === 'task.not_found',
    );
  });
});
