import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { collectArtifacts, globToRegExp } from '../../../src/tasks/artifacts.js';

const sha = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');

describe('globToRegExp', () => {
  const cases: Array<[string, string, boolean]> = [
    ['**', 'a', true],
    ['**', 'a/b/c.txt', true],
    ['*.md', 'README.md', true],
    ['*.md', 'docs/README.md', false],
    ['**/*.md', 'README.md', true],
    ['**/*.md', 'docs/x/README.md', true],
    ['reports/**', 'reports/a/b.json', true],
    ['reports/**', 'other/a.json', false],
    ['out/?.txt', 'out/a.txt', true],
    ['out/?.txt', 'out/ab.txt', false],
    ['a.b', 'aXb', false],
    ['(x)+[y]', '(x)+[y]', true],
    ['a**b', 'aXXb', true],
    ['a**b', 'a/b', false],
  ];
  for (const [glob, path, expected] of cases) {
    test(`${glob} ${expected ? 'matches' : 'does not match'} ${path}`, () => assert.equal(globToRegExp(glob).test(path), expected));
  }
});

describe('collectArtifacts', () => {
  let base: string;
  let outbox: string;
  const taskId = `task-${randomUUID()}`;
  before(() => {
    base = mkdtempSync(join(tmpdir(), 'sbx-artifacts-'));
    outbox = join(base, 'outbox', taskId);
    mkdirSync(join(outbox, 'reports', 'deep'), { recursive: true });
    writeFileSync(join(outbox, 'summary.md'), '# done\n');
    writeFileSync(join(outbox, 'change.diff'), '--- a\n+++ b\n');
    writeFileSync(join(outbox, 'reports', 'deep', 'r.json'), '{"a":1}');
    writeFileSync(join(outbox, '.hidden'), 'h');
    writeFileSync(join(base, 'secret.txt'), 'outside the outbox');
    symlinkSync(join(base, 'secret.txt'), join(outbox, 'leak.txt'));
    symlinkSync(base, join(outbox, 'leakdir'));
  });
  after(() => rmSync(base, { recursive: true, force: true }));

  test('lists regular files with name, storage path, size, content type and sha256', async () => {
    const list = await collectArtifacts(outbox, { patterns: ['**'] });
    assert.deepEqual(
      list.map((a) => a.name),
      ['.hidden', 'change.diff', 'reports/deep/r.json', 'summary.md'],
    );
    const md = list.find((a) => a.name === 'summary.md');
    assert.deepEqual(md, {
      name: 'summary.md',
      path: `outbox/${taskId}/summary.md`,
      size_bytes: 7,
      content_type: 'text/markdown; charset=utf-8',
      checksum: sha('# done\n'),
    });
  });

  test('symlinks are never followed or hashed', async () => {
    const list = await collectArtifacts(outbox, { patterns: ['**'] });
    assert.ok(list.every((a) => !a.name.startsWith('leak')));
    assert.ok(list.every((a) => a.checksum !== sha('outside the outbox')));
  });

  test('patterns select, maxFiles caps, a missing outbox is empty, abort stops', async () => {
    assert.deepEqual(
      (await collectArtifacts(outbox, { patterns: ['reports/**', '*.diff'] })).map((a) => a.name),
      ['change.diff', 'reports/deep/r.json'],
    );
    assert.equal((await collectArtifacts(outbox, { patterns: ['**'], maxFiles: 2 })).length, 2);
    assert.deepEqual(await collectArtifacts(join(base, 'nope'), { patterns: ['**'] }), []);
    await assert.rejects(collectArtifacts(outbox, { patterns: ['**'], signal: AbortSignal.abort() }));
  });
});
