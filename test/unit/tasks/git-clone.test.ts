import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { access, chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { cloneArgs, cloneSource, gitClone } from '../../../src/tasks/git-clone.js';

let dir: string;
let repo: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'git-clone-'));
  repo = join(dir, 'origin');
  const git = (...args: string[]): void => {
    execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=T', '-c', 'init.defaultBranch=main', ...args], {
      cwd: repo,
      stdio: 'ignore',
    });
  };
  execFileSync('mkdir', ['-p', repo]);
  git('init', '-q');
  for (let i = 1; i <= 3; i++) {
    await writeFile(join(repo, 'n.txt'), `${i}\n`);
    git('add', '.');
    git('commit', '-qm', `c${i}`);
  }
  git('checkout', '-qb', 'topic/x');
  await writeFile(join(repo, 'topic.txt'), 'topic\n');
  git('add', '.');
  git('commit', '-qm', 'topic');
  git('checkout', '-q', 'main');
});
after(() => rm(dir, { recursive: true, force: true }));

const exists = (p: string): Promise<boolean> =>
  access(p).then(
    () => true,
    () => false,
  );

describe('gitClone', () => {
  test('argv: options end before the URL; absolute paths become file:// so --depth applies', () => {
    assert.equal(cloneSource('/srv/app'), 'file:///srv/app');
    assert.equal(cloneSource('https://example.com/a.git'), 'https://example.com/a.git');
    assert.deepEqual(cloneArgs('/srv/app', 'main', '/w'), [
      '-c',
      'protocol.ext.allow=never',
      'clone',
      '--depth',
      '1',
      '--branch',
      'main',
      '--',
      'file:///srv/app',
      '/w',
    ]);
    assert.deepEqual(cloneArgs('-oops', null, '/w').slice(-3), ['--', '-oops', '/w']);
  });

  test('a shallow clone of the default branch, or of the branch named', async () => {
    const main = await gitClone({ url: repo, branch: null, dir: join(dir, 'w1') });
    assert.match(main.commit ?? '', /^[0-9a-f]{40}$/);
    assert.equal(await readFile(join(dir, 'w1', 'n.txt'), 'utf8'), '3\n');
    assert.equal(execFileSync('git', ['rev-list', '--count', 'HEAD'], { cwd: join(dir, 'w1'), encoding: 'utf8' }).trim(), '1');
    await gitClone({ url: repo, branch: 'topic/x', dir: join(dir, 'w2') });
    assert.equal(await readFile(join(dir, 'w2', 'topic.txt'), 'utf8'), 'topic\n');
  });

  test('failures say what git said and leave no partial workspace', async () => {
    const w = join(dir, 'w3');
    await assert.rejects(
      gitClone({ url: repo, branch: 'no-such-branch', dir: w }),
      (e: unknown) => e instanceof SvcError && /git clone failed \(exit code 128\): .*no-such-branch/s.test(e.message),
    );
    assert.equal(await exists(w), false);
  });

  test('a clone past its time is killed (the whole group) and reported as a timeout; an abort stops it too', async () => {
    const fakeGit = join(dir, 'slow-git.sh');
    await writeFile(fakeGit, '#!/bin/sh\nsleep 30 &\nwait\n');
    await chmod(fakeGit, 0o755);
    const t0 = Date.now();
    await assert.rejects(
      gitClone({ url: repo, branch: null, dir: join(dir, 'w4'), gitPath: fakeGit, timeoutMs: 300 }),
      (e: unknown) => e instanceof SvcError && e.code === 'server.timeout' && /did not finish within/.test(e.message),
    );
    assert.ok(Date.now() - t0 < 10_000, 'the sleeping grandchild did not hold the result');
    const ac = new AbortController();
    const p = gitClone({ url: repo, branch: null, dir: join(dir, 'w5'), gitPath: fakeGit, signal: ac.signal });
    setTimeout(() => ac.abort(new Error('cancelled by the test')), 100);
    await assert.rejects(p, /cancelled by the test/);
  });

  test('a git that cannot be found is a clear error', async () => {
    await assert.rejects(
      gitClone({ url: repo, branch: null, dir: join(dir, 'w6'), gitPath: join(dir, 'no-git-here') }),
      (e: unknown) => e instanceof SvcError && /git clone failed \(exit code 127\)/.test(e.message),
    );
  });
});
