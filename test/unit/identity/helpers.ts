/** Shared helpers of the identity tests: temp folders, file modes, the openssl CLI. */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';

/** A fresh temp folder removed when the test ends. */
export async function tempDir(t: TestContext, prefix = 'sandboxd-identity-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Permission bits of `path` as an octal string ("0600"). */
export async function modeOf(path: string): Promise<string> {
  return ((await stat(path)).mode & 0o777).toString(8).padStart(4, '0');
}

/** Runs openssl; resolves with its exit code and output (never rejects on a non-zero exit). */
export function openssl(args: string[], cwd?: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { cwd, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err !== null && typeof err.code !== 'number') {
        reject(new Error(`openssl could not run: ${err.message}`));
        return;
      }
      resolve({ code: err === null ? 0 : Number(err.code), out: `${stdout}${stderr}` });
    });
  });
}
