/**
 * Runs a program to its end and hands back its exit code and everything it wrote: for tests that
 * drive real command-line programs (ssh, scp, sbx, the bench runner). The environment is this
 * process's with `env` laid over it.
 */
import { spawn } from 'node:child_process';

export interface ProgramRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runProgram(cmd: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<ProgramRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
