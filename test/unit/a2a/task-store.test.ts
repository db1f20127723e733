/**
 * The executor task store (src/a2a/task-store.ts): records agree with the published artifact
 * schema; a character split between chunks is recorded whole; the per-task and total output caps
 * truncate with an explicit record and evict the oldest ended tasks; a store full of running
 * tasks refuses a new one; lifecycles follow the A2A task states.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { A2aTaskStore, completeUtf8Length } from '../../../src/a2a/task-store.js';
import { SvcError } from '../../../src/core/errors.js';
import { repoRoot } from '../../support/paths.js';

const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
const schema = JSON.parse(readFileSync(join(repoRoot, 'src', 'a2a', 'artifact-record-v1.schema.json'), 'utf8')) as { $id: string };
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv, ['date-time']);
ajv.addSchema(schema);
const recordOk = ajv.getSchema(schema.$id)!;
const listOk = ajv.getSchema(`${schema.$id}#/$defs/List`)!;

function newTask(store: A2aTaskStore, instanceId = 'inst-1'): string {
  return store.create({ instanceId, text: 'echo hi', messageId: 'm-1', commandId: 'a2a-cmd-1' }).id;
}

describe('A2aTaskStore', () => {
  test('records agree with artifact-record-v1.schema.json, and the schema refuses what the store never makes', () => {
    const store = new A2aTaskStore();
    const id = newTask(store);
    store.appendOutput(id, 'stdout', Buffer.from('hello\n'));
    store.appendOutput(id, 'stderr', Buffer.from([0xff, 0x00]));
    store.finishOutput(id);
    const records = store.artifacts('inst-1', id) ?? [];
    assert.equal(records.length, 2);
    for (const r of records) assert.ok(recordOk(r), JSON.stringify(recordOk.errors));
    assert.ok(listOk({ task_id: id, artifacts: records }), JSON.stringify(listOk.errors));
    const first = records[0]!;
    for (const bad of [
      { ...first, extra: 1 },
      { ...first, artifact: { ...first.artifact, stream: 'log' } },
      { ...first, artifact: { ...first.artifact, seq: 0 } },
      { ...first, artifact_id: '../etc-stdout-0001' },
    ]) {
      assert.ok(!recordOk(bad), JSON.stringify(bad));
    }
  });

  test('a multi-byte character split between two chunks is recorded whole in the later record', () => {
    const store = new A2aTaskStore();
    const id = newTask(store);
    const euro = Buffer.from('a€b'); // 61 e2 82 ac 62
    store.appendOutput(id, 'stdout', euro.subarray(0, 2));
    store.appendOutput(id, 'stdout', euro.subarray(2));
    store.finishOutput(id);
    const data = (store.artifacts('inst-1', id) ?? []).map((r) => r.artifact.data);
    assert.deepEqual(data, ['a', '€b']);
    assert.equal(completeUtf8Length(Buffer.from([0x61, 0xf0, 0x9f])), 1);
    assert.equal(completeUtf8Length(Buffer.from([0xff])), 1, 'an invalid byte is not held back');
  });

  test('the per-task cap truncates with one output_truncated record; tasks of other instances are invisible', () => {
    const store = new A2aTaskStore({ maxTaskOutputBytes: 10 });
    const id = newTask(store);
    store.appendOutput(id, 'stdout', Buffer.from('0123456789abcdef'));
    store.appendOutput(id, 'stdout', Buffer.from('more'));
    const records = store.artifacts('inst-1', id) ?? [];
    assert.deepEqual(
      records.map((r) => [r.artifact.kind, r.artifact.data]),
      [
        ['output_chunk', '0123456789'],
        ['output_truncated', ''],
      ],
    );
    assert.equal(store.get('inst-1', id)?.outputTruncated, true);
    assert.equal(store.get('inst-2', id), undefined);
    assert.equal(store.artifacts('inst-2', id), undefined);
  });

  test('the oldest ended task is evicted for a new one; a store of running tasks refuses with a2a.store_full', () => {
    const store = new A2aTaskStore({ maxTasks: 2 });
    const a = newTask(store);
    const b = newTask(store);
    assert.throws(
      () => newTask(store),
      (e: unknown) => e instanceof SvcError && e.code === 'a2a.store_full',
    );
    store.transition(b, 'working', 'test');
    store.transition(b, 'completed', 'test', { exitCode: 0 });
    const c = newTask(store);
    assert.equal(store.get('inst-1', b), undefined, 'the ended task made room');
    assert.ok(store.get('inst-1', a) !== undefined && store.get('inst-1', c) !== undefined);
  });

  test('the total cap evicts ended tasks before it truncates a running one', () => {
    const store = new A2aTaskStore({ maxTotalOutputBytes: 8 });
    const old = newTask(store);
    store.appendOutput(old, 'stdout', Buffer.from('12345678'));
    store.transition(old, 'failed', 'test', { exitCode: 1 });
    const cur = newTask(store);
    store.appendOutput(cur, 'stdout', Buffer.from('abcdef'));
    assert.equal(store.get('inst-1', old), undefined);
    assert.equal(store.artifacts('inst-1', cur)?.[0]?.artifact.data, 'abcdef');
    store.appendOutput(cur, 'stdout', Buffer.from('ghij'));
    assert.deepEqual(
      store.artifacts('inst-1', cur)?.map((r) => r.artifact.kind),
      ['output_chunk', 'output_chunk', 'output_truncated'],
    );
    assert.equal(store.stats().outputBytes, 8);
  });

  test('transitions follow the A2A states; listeners hear each change and nothing after the terminal one', () => {
    const store = new A2aTaskStore();
    const id = newTask(store);
    const heard: string[] = [];
    store.subscribe(id, (t) => heard.push(t.state));
    assert.equal(store.transition(id, 'completed', 'test'), false, 'submitted cannot complete without working');
    store.transition(id, 'working', 'test');
    store.transition(id, 'canceled', 'test');
    assert.equal(store.transition(id, 'completed', 'test', { exitCode: 143 }), false);
    assert.deepEqual(heard, ['working', 'canceled']);
    assert.equal(store.get('inst-1', id)?.exitCode, 143, 'a late exit code is still recorded');
  });

  test('list pages newest first with a page token', () => {
    const store = new A2aTaskStore();
    const ids = [newTask(store), newTask(store), newTask(store)];
    const p1 = store.list('inst-1', { pageSize: 2 });
    assert.deepEqual(
      p1.tasks.map((t) => t.id),
      [ids[2], ids[1]],
    );
    const p2 = store.list('inst-1', { pageSize: 2, pageToken: p1.nextPageToken });
    assert.deepEqual(
      p2.tasks.map((t) => t.id),
      [ids[0]],
    );
    assert.equal(p2.nextPageToken, '');
  });
});

describe('A2aTaskStore on disk (tasks.db)', () => {
  test('tasks and their output come back after a reopen, byte for byte; a task left running is failed; evictions are forgotten', async () => {
    const { mkdtemp, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { A2aTaskDb } = await import('../../../src/a2a/task-db.js');
    const dir = await mkdtemp(join(tmpdir(), 'a2a-db-'));
    try {
      const first = new A2aTaskStore({ db: new A2aTaskDb(dir), maxTasks: 2 });
      const evicted = newTask(first);
      first.transition(evicted, 'working', 'test');
      first.transition(evicted, 'completed', 'test', { exitCode: 0 });
      const done = newTask(first);
      first.transition(done, 'working', 'test');
      first.appendOutput(done, 'stdout', Buffer.from('caf'));
      first.appendOutput(done, 'stdout', Buffer.from([0xc3])); // half of é: held back
      first.appendOutput(done, 'stdout', Buffer.from([0xa9, 0x0a]));
      first.appendOutput(done, 'stderr', Buffer.from([0xff]));
      first.finishOutput(done);
      first.transition(done, 'failed', 'test', { exitCode: 2, reason: 'exit code 2' });
      const running = newTask(first); // evicts the oldest ended task
      first.transition(running, 'working', 'test');
      first.appendOutput(running, 'stdout', Buffer.from('partial\n'));
      const before = first.artifacts('inst-1', done);
      first.close();

      const second = new A2aTaskStore({ db: new A2aTaskDb(dir) });
      assert.equal(second.get('inst-1', evicted), undefined);
      assert.deepEqual(second.artifacts('inst-1', done), before);
      assert.equal(second.get('inst-1', done)?.state, 'failed');
      assert.equal(second.get('inst-1', done)?.exitCode, 2);
      const was = second.get('inst-1', running);
      assert.equal(was?.state, 'failed');
      assert.match(was?.reason ?? '', /restarted/);
      assert.equal(second.artifacts('inst-1', running)?.[0]?.artifact.data, 'partial\n');
      assert.equal(second.stats().outputBytes, 3 + 3 + 1 + 8);
      second.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
