/**
 * Test kit for the screen and native session backends (src/sessions/session-backends.ts): a
 * private runtime directory per test file (the screen socket folder and the native pid files, as
 * TmuxHarness gives tmux a private server), its screen sessions as `screen -ls` lists them, and a
 * cleanup that kills every session left in it, so no SCREEN daemon outlives the file.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execArgv, type ExecResult } from '../../../src/core/tmux-argv.js';
import { sessionBackendPlan } from '../../../src/sessions/session-backends.js';

export class BackendDir {
  /** The runtime directory handed to the plans (BackendContext.runtimeDir). */
  readonly dir: string;

  constructor() {
    this.dir = join(mkdtempSync(join(tmpdir(), 'sbx-backends-')), 'rt');
  }

  /** `screen -ls` of the private socket folder. */
  screenLs(): Promise<ExecResult> {
    return execArgv(['screen', '-ls'], { env: { ...process.env, SCREENDIR: join(this.dir, 'screen') } });
  }

  /** The live screen sessions as `<pid>.<name>`. */
  async screens(): Promise<string[]> {
    const out = (await this.screenLs()).stdout;
    return [...out.matchAll(/^\s+(\d+\.[A-Za-z0-9_-]+)\s.*\((?:Attached|Detached|Multi[^)]*)\)/gm)].map((m) => m[1] ?? '');
  }

  /** `<pid> <start time>` of a native session's leader, or undefined. */
  nativePidFile(sessionName: string): { pid: number; start: string } | undefined {
    try {
      const [pid, start] = readFileSync(join(this.dir, 'native', `${sessionName}.pid`), 'utf8')
        .trim()
        .split(' ');
      return { pid: Number(pid), start: start ?? '' };
    } catch {
      return undefined;
    }
  }

  /** Kills (KILL) every screen and native session left in the directory, then removes it. */
  async close(): Promise<void> {
    const screen = sessionBackendPlan('screen', 'managed', { runtimeDir: this.dir });
    const native = sessionBackendPlan('native', 'direct', { runtimeDir: this.dir });
    for (const s of await this.screens().catch(() => [])) {
      const name = s.slice(s.indexOf('.') + 1);
      if (screen !== undefined) await execArgv(screen.killArgv({ sessionName: name, signal: 'KILL', graceSeconds: 0 }));
    }
    let pidFiles: string[] = [];
    try {
      pidFiles = readdirSync(join(this.dir, 'native')).filter((f) => f.endsWith('.pid'));
    } catch {
      // no native session ran
    }
    for (const f of pidFiles) {
      if (native !== undefined) await execArgv(native.killArgv({ sessionName: f.slice(0, -4), signal: 'KILL', graceSeconds: 0 }));
    }
    rmSync(join(this.dir, '..'), { recursive: true, force: true });
  }
}

/** True while the process exists and is not a zombie. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}
