/**
 * A private tmux server per test (TMUX_TMPDIR in a temp dir, a unique `-L` name) and a real PTY
 * (node-pty, as the agent uses) to run the argvs of src/core/tmux-argv.ts exactly as the agent
 * would. `close()` kills the server and removes the directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn as ptySpawn, type IPty } from 'node-pty';
import {
  execArgv,
  socketArgs,
  tmuxHasSessionArgv,
  tmuxListPanesArgv,
  type ExecResult,
  type TmuxSocket,
} from '../../../src/core/tmux-argv.js';
import { DEADLINE_MS, tail, waitFor } from '../../support/wait.js';

let counter = 0;

export interface PtyRun {
  readonly pty: IPty;
  /** Everything the PTY printed so far (latin1-safe text). */
  output(): string;
  readonly exited: Promise<number>;
  /** Resolves when the output contains `text`; the timeout names it and shows the output's tail. */
  waitFor(text: string | RegExp, deadlineMs?: number): Promise<void>;
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
    const pty = ptySpawn(file ?? 'false', args, {
      name: 'xterm-256color',
      cols: opts.cols ?? 80,
      rows: opts.rows ?? 24,
      cwd: opts.cwd ?? this.dir,
      env: this.env,
    });
    this.#ptys.push(pty);
    let out = '';
    const changed = new Set<() => void>();
    pty.onData((d) => {
      out += d;
      for (const f of changed) f();
    });
    const exited = new Promise<number>((r) => pty.onExit(({ exitCode }) => r(exitCode)));
    return {
      pty,
      output: () => out,
      exited,
      async waitFor(text, deadlineMs = DEADLINE_MS.process) {
        const hit = (): boolean => (typeof text === 'string' ? out.includes(text) : text.test(out));
        await waitFor(
          `PTY output ${typeof text === 'string' ? JSON.stringify(text) : String(text)} from ${argv.join(' ').slice(0, 120)}`,
          hit,
          {
            deadlineMs,
            wake: (recheck) => (changed.add(recheck), () => changed.delete(recheck)),
            lastState: () => `output ${tail(out)}`,
          },
        );
      },
    };
  }

  /** Waits until has-session says `exists`; the timeout lists the sessions the server has. */
  async waitSession(sessionName: string, exists = true, deadlineMs = DEADLINE_MS.process): Promise<void> {
    await waitFor(
      `tmux session ${sessionName} to ${exists ? 'exist' : 'be gone'}`,
      async () => ((await this.exec(tmuxHasSessionArgv({ socket: this.socket, sessionName }))).exitCode === 0) === exists,
      {
        deadlineMs,
        intervalMs: 30,
        lastState: async () => `panes: ${tail((await this.exec(tmuxListPanesArgv({ socket: this.socket }))).stdout || '(none)')}`,
      },
    );
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
