/**
 * For the cli-*.test.ts files: the whole server in-process (startServer on port 0, a fresh state
 * dir, libvirt's test:///default with local agents), and the compiled `sbx` run as a child
 * process the way a user runs it, with its own HOME and XDG_CONFIG_HOME.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn as ptySpawn } from 'node-pty';
import pino from 'pino';
import { loopbackConfig } from '../support/test-config.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { DEADLINE_MS, settled, tail, waitFor as waitForCondition } from '../support/wait.js';

/** The compiled sbx next to this compiled test (dist/ or a private build folder). */
export const SBX_BIN = fileURLToPath(new URL('../../src/bin/sbx.js', import.meta.url));

export interface CliServer {
  readonly server: ServerHandle;
  /** `http://127.0.0.1:<port>` */
  readonly baseUrl: string;
  /** HOME and XDG_CONFIG_HOME of the sbx children. */
  readonly home: string;
  stop(): Promise<void>;
}

export interface SbxResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export async function startCliServer(env: Record<string, string> = {}): Promise<CliServer> {
  const stateDir = await mkdtemp(join(tmpdir(), 'sandboxd-cli-'));
  const home = await mkdtemp(join(tmpdir(), 'sbx-home-'));
  const config = loopbackConfig(stateDir, {
    SVC_ACTOR_SHARDS: '1',
    SVC_SHUTDOWN_DEADLINE_MS: '8000',
    ...env,
  });
  let server: ServerHandle;
  try {
    server = await startServer(config, pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' }));
  } catch (err) {
    await rm(stateDir, { recursive: true, force: true });
    await rm(home, { recursive: true, force: true });
    throw err;
  }
  return {
    server,
    baseUrl: `http://127.0.0.1:${server.ports.http}`,
    home,
    stop: async () => {
      await server.stop();
      await rm(stateDir, { recursive: true, force: true });
      await rm(home, { recursive: true, force: true });
    },
  };
}

/** The environment of an sbx child: only what it needs, pointed at `srv`. */
export function sbxEnv(srv: CliServer, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: srv.home, XDG_CONFIG_HOME: srv.home, SBX_SERVER: srv.baseUrl, ...extra };
}

/** Runs sbx to completion (killed after `timeoutMs`). */
export function runSbx(
  srv: CliServer,
  args: readonly string[],
  opts: { env?: Record<string, string>; stdin?: string; timeoutMs?: number } = {},
): Promise<SbxResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SBX_BIN, ...args], { env: sbxEnv(srv, opts.env), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.end(opts.stdin ?? '');
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Runs sbx with --json, asserts exit 0, and parses stdout. */
export async function sbxJson<T = Record<string, unknown>>(
  srv: CliServer,
  args: readonly string[],
  opts: { env?: Record<string, string>; stdin?: string } = {},
): Promise<T> {
  const r = await runSbx(srv, [...args, '--json'], opts);
  assert.equal(r.code, 0, `sbx ${args.join(' ')} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

/**
 * Polls `probe` until it returns a value (not undefined): the shared helper with this file's
 * defaults; `lastState` (what the timeout shows) is worth giving.
 */
export function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  deadlineMs: number = DEADLINE_MS.agent,
  lastState?: () => Promise<string>,
): Promise<T> {
  return waitForCondition(what, probe, { deadlineMs, intervalMs: 200, ...(lastState !== undefined && { lastState }) });
}

/** A unique VM name (test:///default is shared by every test in the process). */
export function vmName(label: string): string {
  return `agent-cli-${label}-${Math.random().toString(36).slice(2, 7)}`;
}

export interface SbxPty {
  /** Everything the terminal showed so far. */
  output(): string;
  write(data: string): void;
  resize(cols: number, rows: number): void;
  /** Resolves with the exit code. */
  exited: Promise<number>;
  /** The exit code, once it exited; the timeout shows the terminal's last output. */
  waitExit(deadlineMs?: number): Promise<number>;
  /** Waits until the output matches; the timeout shows the terminal's last output. */
  waitFor(re: RegExp, deadlineMs?: number): Promise<void>;
  /**
   * Types `input` (again every 2 s) until the output matches `re`: a shell still starting (no
   * prompt assumed, early input possibly swallowed), an answer that follows something asynchronous.
   */
  typeUntil(input: string, re: RegExp, what: string): Promise<void>;
  kill(): void;
}

/** Runs sbx in a real pseudo-terminal (node-pty), as a user at a terminal would. */
export function runSbxInPty(
  srv: CliServer,
  args: readonly string[],
  opts: { env?: Record<string, string>; cols?: number; rows?: number } = {},
): SbxPty {
  const pty = ptySpawn(process.execPath, [SBX_BIN, ...args], {
    name: 'xterm-256color',
    cols: opts.cols ?? 100,
    rows: opts.rows ?? 30,
    env: { ...sbxEnv(srv, opts.env), TERM: 'xterm-256color' },
  });
  let out = '';
  const waiters = new Set<() => void>();
  pty.onData((d) => {
    out += d;
    for (const w of [...waiters]) w();
  });
  const wake = (recheck: () => void): (() => void) => (waiters.add(recheck), () => waiters.delete(recheck));
  const lastState = (): string => `sbx ${args.join(' ')} showed ${tail(out, 2000)}`;
  const exited = new Promise<number>((resolve) => pty.onExit(({ exitCode }) => resolve(exitCode)));
  return {
    output: () => out,
    write: (d) => pty.write(d),
    resize: (c, r) => pty.resize(c, r),
    exited,
    waitExit: (deadlineMs = DEADLINE_MS.process) => settled(`sbx ${args.join(' ')} to exit`, exited, { deadlineMs, lastState }),
    kill: () => {
      try {
        pty.kill('SIGKILL');
      } catch {
        // Already gone.
      }
    },
    waitFor: async (re, deadlineMs = DEADLINE_MS.process) => {
      await waitForCondition(`the terminal to show ${String(re)}`, () => re.test(out), { deadlineMs, wake, lastState });
    },
    typeUntil: async (input, re, what) => {
      let typedMs = 0;
      await waitForCondition(
        what,
        () => {
          if (re.test(out)) return true;
          if (Date.now() - typedMs >= 2000) {
            typedMs = Date.now();
            pty.write(input);
          }
          return false;
        },
        { deadlineMs: DEADLINE_MS.process, wake, lastState },
      );
    },
  };
}
