import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TaskLog, type TaskLogRecord } from '../../../src/tasks/task-log.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'task-log-'));
});
after(() => rm(dir, { recursive: true, force: true }));

async function records(path: string): Promise<TaskLogRecord[]> {
  return (await readFile(path, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TaskLogRecord);
}

describe('TaskLog', () => {
  test('numbers records from 1, writes them in order as NDJSON (directory created), and hands frames to live subscribers', async () => {
    const path = join(dir, 'a', 'b', 'log.ndjson');
    const log = new TaskLog({ path });
    const frames: string[] = [];
    log.subscribe({ record: (f) => frames.push(Buffer.from(f).toString()), end: () => frames.push('END') });
    assert.equal(log.append('stdout', 'line one\nline two\n'), 1);
    assert.equal(log.append('stderr', 'warn'), 2);
    assert.equal(log.appendEssential({ kind: 'state', to: 'running' }), 3);
    log.finish('completed', '0');
    assert.equal(log.append('stdout', 'after the end'), null, 'nothing after the terminal record');
    log.finish('error', 'twice'); // idempotent
    await log.flushed();
    assert.deepEqual(await records(path), [
      { seq: 1, event: 'stdout', data: 'line one\nline two\n' },
      { seq: 2, event: 'stderr', data: 'warn' },
      { seq: 3, event: 'event', data: '{"kind":"state","to":"running"}' },
      { seq: 4, event: 'completed', data: '0' },
    ]);
    assert.equal(frames[0], 'event: stdout\nid: 1\ndata: line one\ndata: line two\ndata: \n\n');
    assert.equal(frames.at(-1), 'END');
    assert.equal(log.writtenBytes, (await readFile(path)).length);
    await log.close();
  });

  test('a subscriber of a finished log ends at once', () => {
    const log = new TaskLog({ path: join(dir, 'finished.ndjson') });
    log.finish('error', 'failed');
    let ended = false;
    log.subscribe({ record: () => assert.fail('no live records'), end: () => (ended = true) });
    assert.equal(ended, true);
  });

  test('over the byte cap output is dropped after one truncated record; state changes and the terminal record stay', async () => {
    const path = join(dir, 'capped.ndjson');
    const log = new TaskLog({ path, maxBytes: 1000 });
    let appended = 0;
    for (let i = 0; i < 100; i++) if (log.append('stdout', 'x'.repeat(50)) !== null) appended++;
    assert.ok(appended > 5 && appended < 20, `appended ${appended}`);
    log.appendEssential({ kind: 'state', to: 'failed' });
    log.finish('error', 'boom');
    await log.flushed();
    const recs = await records(path);
    const truncated = recs.filter((r) => r.event === 'event' && r.data.includes('"truncated"'));
    assert.equal(truncated.length, 1);
    assert.equal(recs.at(-2)?.data, '{"kind":"state","to":"failed"}');
    assert.deepEqual(recs.at(-1), { seq: recs.length, event: 'error', data: 'boom' });
    assert.deepEqual(
      recs.map((r) => r.seq),
      recs.map((_, i) => i + 1),
      'no seq is skipped',
    );
    await log.close();
  });

  test('bursts are batched but kept in order; flushed() waits for the file', async () => {
    const path = join(dir, 'burst.ndjson');
    const log = new TaskLog({ path });
    for (let i = 0; i < 2000; i++) log.append(i % 2 === 0 ? 'stdout' : 'stderr', `chunk ${i} é😀\n`);
    await log.flushed();
    const recs = await records(path);
    assert.equal(recs.length, 2000);
    assert.equal(recs[1999]?.data, 'chunk 1999 é😀\n');
    assert.deepEqual(
      recs.map((r) => r.seq),
      recs.map((_, i) => i + 1),
    );
    await log.close();
  });

  test('a log whose file cannot be written reports it once and stays live', async () => {
    const errors: unknown[] = [];
    // The log's directory would have to be made below a regular file: ENOTDIR.
    const file = join(dir, 'a-file');
    await writeFile(file, 'x');
    const log = new TaskLog({ path: join(file, 'sub', 'log.ndjson'), onError: (e) => errors.push(e) });
    const frames: number[] = [];
    log.subscribe({ record: (_f, seq) => frames.push(seq), end: () => undefined });
    log.append('stdout', 'a');
    await log.flushed();
    log.append('stdout', 'b');
    await log.flushed();
    assert.equal(errors.length, 1);
    assert.deepEqual(frames, [1, 2]);
  });
});
