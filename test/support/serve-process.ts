/**
 * `sandboxd serve` as a child process, as a user runs it: the built binary with a minimal
 * environment, its state in `stateDir`, every listener on 127.0.0.1 port 0 (the admin listener
 * too unless `env` says otherwise), one actor shard, JSON logs. `url()` waits for the ready line
 * and gives the HTTP listener's base URL (with the trailing slash).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { distRoot } from './paths.js';
import { DEADLINE_MS, waitFor } from './wait.js';

export const SANDBOXD_BIN = join(distRoot, 'src', 'bin', 'sandboxd.js');

export interface ServeProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  url(): Promise<string>;
}

export function spawnServe(stateDir: string, env: Readonly<Record<string, string>> = {}): ServeProcess {
  const child = spawn(process.execPath, [SANDBOXD_BIN, 'serve'], {
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: stateDir,
      SVC_STATE_DIR: stateDir,
      SVC_HTTP_ADDR: '127.0.0.1:0',
      SVC_WS_ADDR: '127.0.0.1:0',
      SVC_GRPC_ADDR: '127.0.0.1:0',
      SVC_ADMIN_ADDR: '127.0.0.1:0',
      SVC_ACTOR_SHARDS: '1',
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  let ready: Promise<string> | undefined;
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exit,
    url: () =>
      (ready ??= waitFor(
        'the ready line of sandboxd serve',
        () => /sandboxd ready: API and dashboard (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)?.[1],
        {
          deadlineMs: DEADLINE_MS.process,
          lastState: () => `stdout: ${out.slice(-800)} stderr: ${err.slice(-800)}`,
        },
      )),
  };
}
