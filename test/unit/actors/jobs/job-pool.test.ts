import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { threadId } from 'node:worker_threads';
import fc from 'fast-check';
import { SvcError } from '../../../../src/core/errors.js';
import { JobPool } from '../../../../actors/jobs/job-pool.js';

const testJobs = new URL('./fixtures/test-jobs.js', import.meta.url);
const start = (mode: 'workers' | 'inline', threads = 1): Promise<JobPool> => JobPool.start({ mode, threads, jobModules: [testJobs] });

for (const mode of ['workers', 'inline'] as const) {
  void describe(`JobPool (${mode})`, () => {
    void test('structured-cloneable arguments come back equal; workers run off the main thread, inline on it', async () => {
      const pool = await start(mode, 2);
      try {
        await fc.assert(
          fc.asyncProperty(fc.jsonValue(), async (v) => assert.deepEqual(await pool.run('test.echo', v), v)),
          { numRuns: 50 },
        );
        const when = new Date(5);
        assert.deepEqual(await pool.run('test.echo', { when, bytes: new Uint8Array([1, 2]) }), { when, bytes: new Uint8Array([1, 2]) });
        const threads = new Set(await Promise.all(Array.from({ length: 20 }, () => pool.run('test.thread', null))));
        if (mode === 'inline') assert.deepEqual([...threads], [threadId]);
        else assert.ok(!threads.has(threadId), `jobs ran on thread ${threadId}, the main thread`);
        assert.equal(pool.threads, mode === 'inline' ? 0 : 2);
      } finally {
        await pool.stop();
      }
    });

    void test('an SvcError keeps its code and details; any other error comes back as an Error with its name and message', async () => {
      const pool = await start(mode);
      try {
        await assert.rejects(
          pool.run('test.failSvc', null),
          (e) =>
            e instanceof SvcError &&
            e.code === 'task.invalid_manifest' &&
            e.message === 'name: must not be empty' &&
            e.details?.['field'] === 'name',
        );
        await assert.rejects(
          pool.run('test.failPlain', null),
          (e) => e instanceof Error && !(e instanceof SvcError) && e.name === 'RangeError' && e.message === 'a plain failure',
        );
        await assert.rejects(pool.run('nope', 'x'), (e) => e instanceof SvcError && e.code === 'request.invalid');
      } finally {
        await pool.stop();
      }
    });

    void test("a transferred buffer moves to the job and back (workers: the caller's view is detached)", async () => {
      const pool = await start(mode);
      try {
        const bytes = new Uint8Array(1 << 16).fill(3);
        const r = (await pool.run('test.sumAndReturn', bytes, { transfer: [bytes.buffer] })) as { sum: number; bytes: Uint8Array };
        assert.equal(r.sum, 3 << 16);
        assert.equal(r.bytes.byteLength, 1 << 16);
        assert.equal(r.bytes[100], 3);
        assert.equal(bytes.byteLength, mode === 'workers' ? 0 : 1 << 16);
      } finally {
        await pool.stop();
      }
    });

    void test('an aborted run rejects with the reason; stop() is idempotent and later runs are refused', async () => {
      const pool = await start(mode);
      const reason = new Error('not needed any more');
      await assert.rejects(pool.run('test.echo', 'x', { signal: AbortSignal.abort(reason) }), (e) => e === reason);
      if (mode === 'workers') {
        const ac = new AbortController();
        const slow = pool.run('test.slow', 10_000, { signal: ac.signal });
        ac.abort(reason);
        await assert.rejects(slow, (e) => e === reason);
      }
      const first = pool.stop();
      assert.equal(pool.stop(), first);
      await first;
      await assert.rejects(pool.run('test.echo', 'x'), (e) => e instanceof SvcError && e.code === 'server.not_ready');
    });
  });
}

void test('JobPool.start rejects a thread count below 1, a module without jobs and a job name defined twice', async () => {
  await assert.rejects(JobPool.start({ mode: 'workers', threads: 0, jobModules: [testJobs] }), RangeError);
  await assert.rejects(
    JobPool.start({ mode: 'workers', threads: 1, jobModules: [new URL('./fixtures/no-jobs.js', import.meta.url)] }),
    /exports no jobs/,
  );
  await assert.rejects(
    JobPool.start({ mode: 'inline', threads: 1, jobModules: [testJobs, new URL('./fixtures/duplicate-jobs.js', import.meta.url)] }),
    /test\.echo is defined twice/,
  );
});
