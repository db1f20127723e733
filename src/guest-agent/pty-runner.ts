/**
 * PTY commands through node-pty: forkpty makes the child a session leader with the pty as its
 * controlling terminal (so ^C in the input reaches the foreground job) and the leader of its own
 * process group. Output is the terminal's (stdout only; stderr is the same terminal).
 *
 * Lossless end of output: see pty-tail.ts. `exited` settles only after node-pty's exit event,
 * which it emits after its socket closed, and the tail drain runs before that close.
 */
import { createRequire } from 'node:module';
import type * as NodePty from 'node-pty';
import type { IPty } from 'node-pty';
import type { CommandOutput } from './command-output.js';
import { notStarted, inert } from './command-runner.js';
import { exitCodeOf, signalGroup, signalName, terminateGroup } from './process-group.js';
import { installTailDrain } from './pty-tail.js';
import type { CommandSpec, ExitInfo, PtyOptions, RunningCommand } from './running-command.js';

// node-pty (a native addon) loads at the first PTY command, not at agent start: a cold start
// inside a TCG guest pays for every module it loads. A load failure surfaces as that command's
// spawn failure.
let nodePty: typeof NodePty | undefined;
const ptySpawn: typeof NodePty.spawn = (file, args, options) => {
  nodePty ??= createRequire(import.meta.url)('node-pty') as typeof NodePty;
  return nodePty.spawn(file, args, options);
};

/** Defaults of CommandRequest.pty_cols / pty_rows / pty_term. */
export const PTY_DEFAULTS: PtyOptions = Object.freeze({ cols: 80, rows: 24, term: 'xterm-256color' });

/** The EOF character (VEOF, ^D) written for StdinChunk.eof: a reader in canonical mode sees end of input. */
const EOF_CHAR = Buffer.from([4]);

export interface PtyStartResult {
  readonly command: RunningCommand;
  /** False when the tail-loss work-around could not be installed (node-pty internals changed). */
  readonly tailDrainInstalled: boolean;
}

/** Starts a command in a new PTY. Never throws: a spawn failure resolves `exited` with exit code -1. */
export function startPtyCommand(spec: CommandSpec, pty: PtyOptions, out: CommandOutput): PtyStartResult {
  let resolveExit!: (e: ExitInfo) => void;
  const exited = new Promise<ExitInfo>((res) => (resolveExit = res));
  let finished = false;
  const finish = (info: ExitInfo): void => {
    if (finished) return;
    finished = true;
    out.end('stdout');
    resolveExit(info);
  };

  let term: IPty;
  try {
    term = ptySpawn(spec.command, [...spec.args], {
      name: pty.term,
      cols: pty.cols,
      rows: pty.rows,
      cwd: spec.cwd,
      env: { ...spec.env },
      // Buffers, not strings: output is bytes (a UTF-8 decoder would mangle split sequences and binary).
      encoding: null,
      ...(spec.uid !== undefined ? { uid: spec.uid } : {}),
      ...(spec.gid !== undefined ? { gid: spec.gid } : {}),
    });
  } catch (err) {
    finish(notStarted(`pty spawn failed: ${(err as Error).message}`));
    return { command: inert(spec.commandId, exited), tailDrainInstalled: true };
  }

  // With encoding null node-pty hands out Buffers, though its typings say string.
  term.onData((d) => out.write('stdout', d as unknown as Buffer));
  const tailDrainInstalled = installTailDrain(term, (d) => out.write('stdout', d));
  let leaderExited = false;
  term.onExit(({ exitCode, signal }) => {
    leaderExited = true;
    finish({ exitCode: exitCodeOf(exitCode, signal ?? null), signal: signal ? signalName(signal) : undefined, error: '' });
  });

  const pid = term.pid;
  const command: RunningCommand = {
    commandId: spec.commandId,
    pid,
    isPty: true,
    writeStdin(data, eof) {
      // Writing after the leader exited hits a closed fd (node-pty logs EBADF): drop instead.
      if (finished || leaderExited) return;
      if (data.length > 0) term.write(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      if (eof) term.write(EOF_CHAR);
    },
    resize(cols, rows) {
      if (finished || !(cols > 0 && rows > 0 && cols <= 10_000 && rows <= 10_000)) return false;
      try {
        term.resize(cols, rows);
        return true;
      } catch {
        return false; // the pty closed between the check and the ioctl
      }
    },
    setReading(reading) {
      // node-pty pauses/resumes its socket on the master: the slave's writer blocks once the
      // pty's buffer is full. At exit node-pty's own timer and the tail drain (pty-tail.ts)
      // still read what is left.
      if (finished) return;
      if (reading) term.resume();
      else term.pause();
    },
    signal(signo) {
      const name = signalName(signo);
      return !finished && name !== undefined && signalGroup(pid, name);
    },
    terminate: (graceMs) => (finished ? Promise.resolve() : terminateGroup(pid, exited, graceMs)),
    exited,
  };
  return { command, tailDrainInstalled };
}
