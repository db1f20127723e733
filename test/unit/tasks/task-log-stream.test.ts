import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { MemorySseSink } from '../../../src/http/inject.js';
import { parseLastEventId, readRecords, streamTaskLog } from '../../../src/tasks/task-log-stream.js';
import { TaskLog } from '../../../src/tasks/task-log.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';

let dir: string;
let n = 0;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'task-log-stream-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const newLog = (maxBytes?: number): TaskLog =>
  new TaskLog({ path: join(dir, `log-${++n}.ndjson`), ...(maxBytes !== undefined ? { maxBytes } : {}) });

/** Event name, id and data of each frame a sink received. */
function parsed(sink: MemorySseSink): Array<{ event: string; id: string | undefined; data: string }> {
  return sink.frames.map((f) => {
    const lines = f.split('\n').filter(Boolean);
    return {
      event: lines.find((l) => l.startsWith('event: '))?.slice(7) ?? 'message',
      id: lines.find((l) => l.startsWith('id: '))?.slice(4),
      data: lines
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n'),
    };
  });
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('streamTaskLog', () => {
  test('a finished log replays from the start (or after Last-Event-ID) and the stream closes', async () => {
    const log = newLog();
    log.append('stdout', 'hello\n');
    log.appendEssential({ kind: 'state', to: 'completed' });
    log.finish('completed', '0');
    const sink = new MemorySseSink();
    await streamTaskLog(log, sink);
    assert.deepEqual(parsed(sink), [
      { event: 'stdout', id: '1', data: 'hello\n' },
      { event: 'event', id: '2', data: '{"kind":"state","to":"completed"}' },
      { event: 'completed', id: '3', data: '0' },
    ]);
    assert.equal(sink.closed, true);
    const resumed = new MemorySseSink();
    await streamTaskLog(log, resumed, { afterSeq: 2 });
    assert.deepEqual(
      parsed(resumed).map((f) => f.id),
      ['3'],
    );
    assert.equal(resumed.closed, true);
  });

  test('joining a live log while it is written: every record exactly once, in order, then the end', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 0, max: 5 }),
        async (before, later, ticksBetween) => {
          const log = newLog();
          for (let i = 0; i < before; i++) log.append('stdout', `b${i}`);
          const sink = new MemorySseSink();
          const streaming = streamTaskLog(log, sink);
          for (let i = 0; i < later; i++) {
            log.append(i % 3 === 0 ? 'stderr' : 'stdout', `l${i}`);
            for (let t = 0; t < i % (ticksBetween + 1); t++) await tick();
          }
          log.finish('completed', '0');
          await streaming;
          await log.close();
          const ids = parsed(sink).map((f) => Number(f.id));
          assert.deepEqual(
            ids,
            Array.from({ length: before + later + 1 }, (_, i) => i + 1),
          );
          assert.equal(sink.closed, true);
        },
      ),
      { numRuns: 40 },
    );
  });

  test('a replay is paced by the socket: it waits while the sink is backpressured', async () => {
    const log = newLog();
    for (let i = 0; i < 50; i++) log.append('stdout', `r${i}`);
    log.finish('error', 'failed');
    const sink = new MemorySseSink();
    sink.setBackpressure(true);
    const streaming = streamTaskLog(log, sink);
    await waitFor('the first frame of the replay', () => sink.frames.length > 0, { deadlineMs: DEADLINE_MS.local, intervalMs: 5 });
    // A negative check: a pause in which a replay that ignored the backpressure would write more.
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(sink.frames.length, 1, 'one frame written, then the replay waits');
    sink.setBackpressure(false);
    for (let i = 0; i < 50 && !sink.closed; i++) await tick();
    await streaming;
    assert.equal(sink.frames.length, 51);
    assert.equal(parsed(sink).at(-1)?.event, 'error');
    assert.equal(sink.closed, true);
  });

  test('a live subscriber that falls behind gets a slow_subscriber hint and is closed without a terminal record', async () => {
    const log = newLog();
    log.append('stdout', 'first');
    const sink = new MemorySseSink();
    await streamTaskLog(log, sink, { maxQueuedBytes: 4096 });
    sink.setBackpressure(true);
    for (let i = 0; i < 200; i++) log.append('stdout', 'y'.repeat(100));
    assert.equal(sink.closed, true);
    const last = parsed(sink).at(-1);
    assert.equal(last?.event, 'event');
    assert.equal(last?.id, undefined);
    const hint = JSON.parse(last?.data ?? '{}') as { kind: string; resume_after: number };
    assert.equal(hint.kind, 'slow_subscriber');
    assert.ok(hint.resume_after >= 1);
    assert.ok(!parsed(sink).some((f) => f.event === 'completed' || f.event === 'error'));
    log.finish('completed', '0');
  });

  test('a live stream ends after the terminal record once its queue is written', async () => {
    const log = newLog();
    const sink = new MemorySseSink();
    await streamTaskLog(log, sink);
    sink.setBackpressure(true);
    log.append('stdout', 'a');
    log.append('stdout', 'b');
    log.finish('completed', '0');
    assert.equal(sink.closed, false, 'queued frames still to write');
    sink.setBackpressure(false);
    assert.equal(sink.closed, true);
    assert.deepEqual(
      parsed(sink).map((f) => f.data),
      ['a', 'b', '0'],
    );
  });
});

describe('readRecords and Last-Event-ID', () => {
  test('reads whole lines up to the limit across chunk borders and multi-byte characters; skips torn lines', async () => {
    const path = join(dir, 'manual.ndjson');
    const big = 'é'.repeat(40_000);
    const lines = [
      JSON.stringify({ seq: 1, event: 'stdout', data: big }),
      'not json',
      JSON.stringify({ seq: 2, event: 'stderr', data: '😀' }),
    ];
    const text = `${lines.join('\n')}\n{"seq":3,"event":"std`;
    await writeFile(path, text);
    const out = [];
    for await (const r of readRecords(path, Buffer.byteLength(text))) out.push(r);
    assert.deepEqual(out, [
      { seq: 1, event: 'stdout', data: big },
      { seq: 2, event: 'stderr', data: '😀' },
    ]);
    const none = [];
    for await (const r of readRecords(join(dir, 'missing.ndjson'), 100)) none.push(r);
    assert.deepEqual(none, []);
  });

  test('parseLastEventId', () => {
    assert.equal(parseLastEventId(undefined), 0);
    assert.equal(parseLastEventId('17'), 17);
    assert.equal(parseLastEventId(' 3 '), 3);
    for (const bad of ['', '-1', '1.5', 'abc', '9'.repeat(20)]) assert.equal(parseLastEventId(bad), 0, bad);
  });
});
