/**
 * A private tmux server per test (TMUX_TMPDIR in a temp dir, a unique `-L` name) and a real PTY
 * (node-pty, as the agent uses) to run the argvs of src/sessions/tmux.ts exactly as the agent
 * would. `close()` kills the server and removes the directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn as ptySpawn, type IPty } from 'node-pty';
import { execArgv, socketArgs, tmuxHasSessionArgv, type ExecResult, type TmuxSocket } from '../../../src/sessions/tmux.js';

let counter = 0;

export interface PtyRun {
  readonly pty: IPty;
  /** Everything the PTY printed so far (latin1-safe text). */
  output(): string;
  readonly exited: Promise<number>;
  /** Resolves when the output contains `text` (rejects after timeoutMs). */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
}

export class TmuxHarness {
  readonly dir: string;
  readonly socket: TmuxSocket;
  readonly env: NodeJS.ProcessEnv;
  readonly #ptys: IPty[] = [];

  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), 'sbx-tmux-'));
    this.socket = { name: `t${process.pid}-${++counter}` };
    this.env = { ...process.env, TMUX_TMPDIR: this.dir, TMUX: '', TERM: 'xterm-256color', LANG: 'C.UTF-8' };
  }

  exec(argv: readonly string[]): Promise<ExecResult> {
    return execArgv(argv, { env: this.env, cwd: this.dir });
  }

  /** tmux with this server's socket. */
  tmux(...args: string[]): Promise<ExecResult> {
    return this.exec(['tmux', ...socketArgs(this.socket), ...args]);
  }

  /** Runs an argv in a new PTY, like the agent's allocate_pty commands. */
  spawn(argv: readonly string[], opts: { cols?: number; rows?: number; cwd?: string } = {}): PtyRun {
    const [file, ...args] = argv;
    const pty = ptySpawn(file ?? 'false', args, { name: 'xterm-256color', cols: opts.cols ?? 80, rows: opts.rows ?? 24, cwd: opts.cwd ?? this.dir, env: this.env });
    this.#ptys.push(pty);
    let out = '';
    pty.onData((d) => (out += d));
    const exited = new Promise<number>((r) => pty.onExit(({ exitCode }) => r(exitCode)));
    return {
      pty,
      output: () => out,
      exited,
      async waitFor(text, timeoutMs = 15_000) {
        const deadline = Date.now() + timeoutMs;
        const hit = (): boolean => (typeof text === 'string' ? out.includes(text) : text.test(out));
        while (!hit()) {
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${String(text)}; output tail: ${JSON.stringify(out.slice(-300))}`);
          await sleep(20);
        }
      },
    };
  }

  /** Polls until has-session says `exists` (rejects after timeoutMs). */
  async waitSession(sessionName: string, exists = true, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.exec(tmuxHasSessionArgv({ socket: this.socket, sessionName }));
      if ((r.exitCode === 0) === exists) return;
      if (Date.now() > deadline) throw new Error(`session ${sessionName} ${exists ? 'never appeared' : 'never went away'}`);
      await sleep(30);
    }
  }

  async close(): Promise<void> {
    for (const p of this.#ptys) {
      try {
        p.kill();
      } catch {
        // already gone
      }
    }
    await this.tmux('kill-server').catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Single-quotes text for sh. */
export function shq(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** Polls `check` until it returns true. */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(25);
  }
}
