import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SvcError } from '../../../../src/core/errors.js';
import { JobPool } from '../../../../actors/jobs/job-pool.js';
import type { JobName } from '../../../../actors/jobs/jobs.js';

for (const mode of ['workers', 'inline'] as const) {
  void describe(`JobPool (${mode})`, () => {
    void test('sha256 of bytes and of strings matches node:crypto', async () => {
      const pool = await JobPool.start({ mode, threads: 2 });
      try {
        await fc.assert(
          fc.asyncProperty(fc.oneof(fc.uint8Array({ maxLength: 5000 }), fc.string({ unit: 'grapheme' })), async (data) => {
            const expected = createHash('sha256').update(data).digest('hex');
            assert.equal(await pool.run('sha256', data), expected);
          }),
          { numRuns: 50 },
        );
        // Many at once, spread over the threads.
        const inputs = Array.from({ length: 40 }, (_, i) => new Uint8Array(10_000).fill(i));
        const results = await Promise.all(inputs.map((d) => pool.run('sha256', d)));
        assert.deepEqual(results, inputs.map((d) => createHash('sha256').update(d).digest('hex')));
      } finally {
        await pool.stop();
      }
    });

    void test('errors come back as SvcError with their code; an aborted run rejects with the reason', async () => {
      const pool = await JobPool.start({ mode, threads: 1 });
      try {
        await assert.rejects(pool.run('nope' as JobName, 'x'), (e) => e instanceof SvcError && e.code === 'request.invalid');
        await assert.rejects(pool.run('sha256', 42 as unknown as string), (e) => e instanceof SvcError && e.code === 'request.invalid');
        const reason = new Error('not needed any more');
        await assert.rejects(pool.run('sha256', 'x', { signal: AbortSignal.abort(reason) }), (e) => e === reason);
      } finally {
        await pool.stop();
      }
    });

    void test('stop() is idempotent and later runs are refused', async () => {
      const pool = await JobPool.start({ mode, threads: 1 });
      const first = pool.stop();
      assert.equal(pool.stop(), first);
      await first;
      await assert.rejects(pool.run('sha256', 'x'), (e) => e instanceof SvcError && e.code === 'server.not_ready');
    });
  });
}

void test('JobPool.start rejects a thread count below 1', async () => {
  await assert.rejects(JobPool.start({ mode: 'workers', threads: 0 }), RangeError);
});
