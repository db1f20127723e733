/**
 * The tasks feature's jobs give the same results on the job pool as inline: artifact hashes,
 * outbox archives (files and skipped entries, errors included) and parsed manifests (400s too).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { JobPool } from '../../../actors/jobs/job-pool.js';
import { SvcError } from '../../../src/core/errors.js';
import { hashFileJob, parseSubmissionJob, readTarJob, TASK_JOBS_MODULE } from '../../../src/tasks/task-jobs.js';
import { ByteSlabs } from '../../../src/util/byte-slabs.js';
import { INVALID, VALID } from './manifest-fixtures.js';

/** Resolves with the value, or with the error's name, code, message and whether it is an SvcError (other classes do not cross threads). */
async function settle(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (value) => ({ value }),
    (err: Error & { code?: string }) => ({ error: { name: err.name, code: err.code, message: err.message, svc: err instanceof SvcError } }),
  );
}

void describe('task jobs: pool and inline agree', () => {
  let pool: JobPool;
  let dir: string;
  before(async () => {
    pool = await JobPool.start({ mode: 'workers', threads: 1, jobModules: [TASK_JOBS_MODULE] });
    dir = await mkdtemp(join(tmpdir(), 'task-jobs-'));
    await mkdir(join(dir, 'out', 'reports'), { recursive: true });
    await writeFile(join(dir, 'out', 'reports', 'summary.md'), '# done\n');
    await writeFile(join(dir, 'out', 'big.bin'), Buffer.alloc(3 * 65536 + 17, 7));
    await writeFile(join(dir, 'out', 'empty'), '');
    await symlink('/etc/passwd', join(dir, 'out', 'link'));
  });
  after(async () => {
    await pool.stop();
    await rm(dir, { recursive: true, force: true });
  });

  void test('tasks.hashFile: sha256 and size of files; null for a symlink or a missing file', async () => {
    for (const name of ['reports/summary.md', 'big.bin', 'empty', 'link', 'missing']) {
      const path = join(dir, 'out', name);
      const inline = await hashFileJob(undefined, path);
      assert.deepEqual(await hashFileJob(pool, path), inline, name);
      if (name === 'link' || name === 'missing') assert.equal(inline, null);
      else assert.match(inline?.sha256 ?? '', /^[0-9a-f]{64}$/);
    }
  });

  void test('tasks.scanTar: the same files, bytes and skipped entries from chunks of a real archive; a corrupt one fails alike', async () => {
    const archive = execFileSync('tar', ['-c', '-C', join(dir, 'out'), '.']);
    /** The archive as command output arrives: odd-sized chunks, into small slabs. */
    const slabs = (bytes: Buffer = archive): ByteSlabs => {
      const s = new ByteSlabs(64 * 1024);
      for (let at = 0; at < bytes.length; at += 4093) s.push(bytes.subarray(at, at + 4093));
      return s;
    };
    const inline = await readTarJob(undefined, slabs());
    const pooled = await readTarJob(pool, slabs());
    const view = (c: typeof inline): unknown => ({
      files: c.files.map((f) => [f.name, f.data.toString('base64')]).sort(),
      skipped: c.skipped,
    });
    assert.deepEqual(view(pooled), view(inline));
    assert.equal(pooled.files.length, 3);
    assert.deepEqual(pooled.skipped, ['link (type 2)']);

    const corrupt = Buffer.from(archive);
    corrupt[10] = (corrupt[10] ?? 0) ^ 0xff;
    const bad = await settle(readTarJob(undefined, slabs(corrupt)));
    assert.deepEqual(await settle(readTarJob(pool, slabs(corrupt))), bad);
    assert.match(JSON.stringify(bad), /bad header checksum at byte 0/);
    assert.deepEqual(
      await settle(readTarJob(pool, slabs(), { maxFiles: 2 })),
      await settle(readTarJob(undefined, slabs(), { maxFiles: 2 })),
    );
    assert.deepEqual(await settle(readTarJob(pool, new ByteSlabs())), await settle(readTarJob(undefined, new ByteSlabs())));
  });

  void test('tasks.parseSubmission: every valid and invalid fixture gives the same manifest or the same 400', async () => {
    const defaults = { model: 'claude-opus-4-1' };
    const bodies: unknown[] = [
      ...VALID.map((f) => ({ manifest: f.manifest })),
      ...INVALID.map((f) => ({ manifest: f.manifest })),
      { manifest_yaml: 'name: fix-login\nrepository: {url: /srv/repos/app}\nprompt: Fix the login bug\n' },
      { manifest_yaml: 'name: [unclosed' },
      'not an object',
    ];
    for (const body of bodies) {
      assert.deepEqual(
        await settle(parseSubmissionJob(pool, body, defaults)),
        await settle(parseSubmissionJob(undefined, body, defaults)),
        JSON.stringify(body).slice(0, 120),
      );
    }
  });
});
