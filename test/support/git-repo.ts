/**
 * A git repository for tests (task manifests clone it): `initGitRepo` makes the folder, `git init`
 * on branch main, one commit "first" of hello.txt, and returns a `git` that runs in it with a test
 * identity and no prompts.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export type Git = (...args: string[]) => void;

export async function initGitRepo(repo: string): Promise<Git> {
  await mkdir(repo, { recursive: true });
  const git: Git = (...args) => {
    execFileSync('git', ['-c', 'user.email=test@example.com', '-c', 'user.name=Test', '-c', 'init.defaultBranch=main', ...args], {
      cwd: repo,
      stdio: 'ignore',
    });
  };
  git('init', '-q');
  await writeFile(join(repo, 'hello.txt'), 'hello world\n');
  git('add', '.');
  git('commit', '-qm', 'first');
  return git;
}
