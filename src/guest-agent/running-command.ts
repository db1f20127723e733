/**
 * What the agent needs from a started command, PTY or not. Runners write output into a
 * CommandOutput, end its streams, and only then settle `exited`, so a CommandResult built after
 * `exited` always follows the command's last chunk.
 */

/** How a command ended. */
export interface ExitInfo {
  /** Exit status; 128 + signal number when killed by a signal; -1 when it could not start. */
  readonly exitCode: number;
  /** Signal that ended it, if any. */
  readonly signal: NodeJS.Signals | undefined;
  /** Why it could not start (empty otherwise). */
  readonly error: string;
}

/** A command to start, resolved (cwd absolute, env merged, user resolved). */
export interface CommandSpec {
  readonly commandId: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  /** Run as this uid/gid (the agent is root). */
  readonly uid?: number;
  readonly gid?: number;
}

export interface PtyOptions {
  /** Default 80. */
  readonly cols: number;
  /** Default 24. */
  readonly rows: number;
  /** TERM; default xterm-256color. */
  readonly term: string;
}

export interface RunningCommand {
  readonly commandId: string;
  /** Pid of the leader, which is also the process group id. */
  readonly pid: number;
  readonly isPty: boolean;
  /** Writes to stdin (PTY: the terminal); eof closes it (PTY: sends the EOF character, ^D). */
  writeStdin(data: Uint8Array, eof: boolean): void;
  /** PTY only; false for a pipe command or after exit. */
  resize(cols: number, rows: number): boolean;
  /** Sends a signal to the whole process group; false when it is gone or the number is unknown. */
  signal(signo: number): boolean;
  /**
   * Stops (false) or restarts (true) reading the command's output (stdout/stderr pipes, or the
   * PTY): the child blocks on write while not read. Backpressure, output-flow.ts.
   */
  setReading(reading: boolean): void;
  /** SIGTERM to the group, SIGKILL after graceMs; resolves when it has exited. */
  terminate(graceMs: number): Promise<void>;
  /** Settles after the last output was handed over and every stream ended. Never rejects. */
  readonly exited: Promise<ExitInfo>;
}
