/** Runs sbx in this process (runCli) with captured output: the CLI unit tests' one way to call it. */
import { PassThrough } from 'node:stream';
import { runCli } from '../../../src/cli/run.js';
import type { CliEnv } from '../../../src/cli/config.js';

export async function sbx(argv: string[], env: CliEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await runCli(argv, { stdout, stderr, stdin: new PassThrough(), env });
  return { code, stdout: out, stderr: err };
}
