/**
 * Pipe commands: child_process.spawn without a shell (command + args as given), detached so the
 * child leads its own process group, stdout/stderr streamed as read.
 *
 * Completion waits for stdout and stderr to reach EOF, so output is complete even when the
 * leader exits first. A background process that keeps the pipes open (a daemon started by the
 * command) would hold the result forever, so after the leader exits the pipes get
 * DRAIN_AFTER_EXIT_MS more; output written later than that is not captured.
 */
import { spawn } from 'node:child_process';
import type { CommandOutput } from './command-output.js';
import { exitCodeOf, signalGroup, signalName, terminateGroup } from './process-group.js';
import type { CommandSpec, ExitInfo, RunningCommand } from './running-command.js';

/** How long pipes may stay open after the leader exited, in ms. */
export const DRAIN_AFTER_EXIT_MS = 5000;

/** Result of a command that never started. */
export function notStarted(error: string): ExitInfo {
  return { exitCode: -1, signal: undefined, error };
}

/**
 * Starts a pipe command. Never throws: a spawn failure resolves `exited` with exit code -1.
 * @param drainAfterExitMs see DRAIN_AFTER_EXIT_MS.
 */
export function startPipeCommand(spec: CommandSpec, out: CommandOutput, drainAfterExitMs = DRAIN_AFTER_EXIT_MS): RunningCommand {
  let resolveExit!: (e: ExitInfo) => void;
  const exited = new Promise<ExitInfo>((res) => (resolveExit = res));
  let finished = false;
  const finish = (info: ExitInfo): void => {
    if (finished) return;
    finished = true;
    out.end('stdout');
    out.end('stderr');
    resolveExit(info);
  };

  let child;
  try {
    child = spawn(spec.command, [...spec.args], {
      cwd: spec.cwd,
      env: { ...spec.env },
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      shell: false,
      windowsHide: true,
      ...(spec.uid !== undefined ? { uid: spec.uid } : {}),
      ...(spec.gid !== undefined ? { gid: spec.gid } : {}),
    });
  } catch (err) {
    finish(notStarted(`spawn failed: ${(err as Error).message}`));
    return inert(spec.commandId, exited);
  }

  const pid = child.pid ?? -1;
  let status: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let openStreams = 2;
  let drainTimer: NodeJS.Timeout | undefined;
  const maybeFinish = (): void => {
    if (status && openStreams === 0) {
      clearTimeout(drainTimer);
      finish({ exitCode: exitCodeOf(status.code, status.signal), signal: status.signal ?? undefined, error: '' });
    }
  };
  child.stdout.on('data', (d: Buffer) => out.write('stdout', d));
  child.stderr.on('data', (d: Buffer) => out.write('stderr', d));
  for (const s of [child.stdout, child.stderr]) {
    // 'close' (not 'end') also fires when the drain timer destroys the pipe.
    s.once('close', () => {
      openStreams -= 1;
      maybeFinish();
    });
  }
  // EPIPE when the child closed its stdin before we wrote: nothing to report.
  child.stdin.on('error', () => undefined);
  child.on('error', (err) => {
    if (child.pid === undefined) finish(notStarted(`spawn failed: ${err.message}`));
  });
  let reading = true;
  // The drain window counts only while the pipes are read: output held back by backpressure
  // after the leader exited is not cut off.
  const armDrain = (): void => {
    clearTimeout(drainTimer);
    drainTimer = undefined;
    if (!status || openStreams === 0 || !reading) return;
    drainTimer = setTimeout(() => {
      child.stdout.destroy();
      child.stderr.destroy();
    }, drainAfterExitMs);
    drainTimer.unref();
  };
  child.on('exit', (code, signal) => {
    status = { code, signal };
    armDrain();
    maybeFinish();
  });

  return {
    commandId: spec.commandId,
    pid,
    isPty: false,
    writeStdin(data, eof) {
      if (finished || child.stdin.destroyed) return;
      if (data.length > 0) child.stdin.write(data);
      if (eof) child.stdin.end();
    },
    resize: () => false,
    setReading(on) {
      if (finished || on === reading) return;
      reading = on;
      for (const s of [child.stdout, child.stderr]) {
        if (s.destroyed) continue;
        if (on) s.resume();
        else s.pause();
      }
      armDrain();
    },
    signal(signo) {
      const name = signalName(signo);
      return !finished && name !== undefined && signalGroup(pid, name);
    },
    terminate: (graceMs) => (finished || pid < 0 ? Promise.resolve() : terminateGroup(pid, exited, graceMs)),
    exited,
  };
}

/** A RunningCommand for a command that never started. */
export function inert(commandId: string, exited: Promise<ExitInfo>): RunningCommand {
  return {
    commandId,
    pid: -1,
    isPty: false,
    writeStdin: () => undefined,
    resize: () => false,
    setReading: () => undefined,
    signal: () => false,
    terminate: () => Promise.resolve(),
    exited,
  };
}
