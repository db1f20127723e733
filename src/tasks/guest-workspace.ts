/**
 * A task's workspace and outbox when the VM is a real guest (issue 9): the guest cannot see the
 * host's files, so the server moves them through the task VM's agent, as ordinary commands.
 *
 *   push   the host's clone (staging) goes in as a tar stream on the stdin of
 *          `sh -c '… tar -x -C tasks/<id>/workspace'` in the agent's work dir; the command prints
 *          the guest's absolute task folder, whose `workspace` and `outbox` the coding agent gets
 *          as SANDBOX_WORKSPACE and SANDBOX_OUTBOX.
 *   pull   `tar -c -C <outbox> .` in the guest; its stdout is read by tar-reader.ts (regular files
 *          only, names confined to the outbox; links and devices skipped) and written into the
 *          host's outbox, where artifacts are listed and hashed as for local agents.
 *
 * Nothing is lost silently: a gap in the pulled stream, a non-zero exit, a corrupt archive or
 * one over `maxBytes` rejects. Each step is bounded by `timeoutMs` and the task's signal (the
 * guest command is killed then).
 */
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { CommandResultFrame } from '../../actors/protocol/agent-frames.js';
import type { RunningCommand } from '../agent-link/command-client.js';
import type { CommandStarter } from './agent-run.js';
import type { JobRunner } from '../util/job-runner.js';
import { ByteSlabs } from '../util/byte-slabs.js';
import { readTarJob } from './task-jobs.js';

/** Default bound of one transfer (ms). */
export const DEFAULT_TRANSFER_TIMEOUT_MS = 5 * 60_000;
/** Default cap on a pulled outbox archive (bytes). */
export const DEFAULT_MAX_OUTBOX_BYTES = 256 * 1024 * 1024;
/** SIGKILL. */
const SIGKILL = 9;

export interface GuestDirs {
  /** Absolute paths inside the guest. */
  readonly workspace: string;
  readonly outbox: string;
}

export interface TransferOptions {
  readonly agentId: string;
  readonly taskId: string;
  readonly signal: AbortSignal;
  /** Default {@link DEFAULT_TRANSFER_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
}

/** The push script: $1 is the task id (checked by the caller's id rules: no shell in it). */
const PUSH_SCRIPT =
  'set -e; d="$PWD/tasks/$1"; rm -rf "$d"; mkdir -p "$d/workspace" "$d/outbox"; tar -x -C "$d/workspace"; printf "%s\\n" "$d"';

/** Copies `hostWorkspace` into the guest; resolves with the guest's folders. */
export async function pushWorkspace(commands: CommandStarter, hostWorkspace: string, o: TransferOptions): Promise<GuestDirs> {
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  const run = await startCollecting(commands, o, `${o.taskId}-push`, 'sh', ['-c', PUSH_SCRIPT, 'sh', o.taskId], stdout, stderr);
  const tar = spawn('tar', ['-c', '-C', hostWorkspace, '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const tarErr: Buffer[] = [];
  tar.stderr.on('data', (d: Buffer) => tarErr.push(d));
  const tarExit = new Promise<number>((resolve) => tar.once('close', (code) => resolve(code ?? 1)));
  try {
    // One chunk at a time: each waits for the agent's actor to take it (flow control).
    for await (const chunk of tar.stdout as AsyncIterable<Buffer>) {
      if (o.signal.aborted) break;
      await run.cmd.stdin(chunk);
    }
    await run.cmd.stdin(new Uint8Array(0), true);
  } catch (err) {
    tar.kill('SIGKILL');
    await run.kill();
    throw err;
  }
  const tarCode = await tarExit;
  const result = await run.result;
  if (tarCode !== 0) throw new Error(`tar of the workspace failed (${tarCode}): ${Buffer.concat(tarErr).toString().trim()}`);
  if (result.exit_code !== 0)
    throw new Error(`copying the workspace into the guest failed (exit ${result.exit_code}): ${lastLine(stderr) || result.error}`);
  const dir = Buffer.concat(stdout).toString('utf8').trim().split('\n').at(-1) ?? '';
  if (!dir.startsWith('/')) throw new Error(`the guest gave no task folder (stdout ${JSON.stringify(dir)})`);
  return { workspace: `${dir}/workspace`, outbox: `${dir}/outbox` };
}

/**
 * Copies the guest's outbox into `hostOutbox` (created); resolves with the number of files
 * written and the entries skipped (links, devices).
 */
export async function pullOutbox(
  commands: CommandStarter,
  guestOutbox: string,
  hostOutbox: string,
  o: TransferOptions & { maxBytes?: number; /** reads the archive on the job pool; without it, here */ jobs?: JobRunner },
): Promise<{ files: number; skipped: string[] }> {
  const maxBytes = o.maxBytes ?? DEFAULT_MAX_OUTBOX_BYTES;
  // collected in slabs that can move to the job pool whole (no 256 MiB join on the main thread)
  const stdout = new ByteSlabs();
  const stderr: Buffer[] = [];
  const run = await startCollecting(commands, o, `${o.taskId}-pull`, 'tar', ['-c', '-C', guestOutbox, '.'], stdout, stderr, maxBytes);
  const result = await run.result;
  if (run.state.problem !== null) throw new Error(run.state.problem);
  if (result.exit_code !== 0)
    throw new Error(`reading the guest's outbox failed (exit ${result.exit_code}): ${lastLine(stderr) || result.error}`);
  const contents = await readTarJob(o.jobs, stdout);
  await mkdir(hostOutbox, { recursive: true, mode: 0o700 });
  for (const f of contents.files) {
    const target = join(hostOutbox, ...f.name.split('/'));
    await mkdir(dirname(target), { recursive: true, mode: 0o700 });
    await writeFile(target, f.data, { mode: 0o600, flag: 'wx' });
  }
  return { files: contents.files.length, skipped: contents.skipped };
}

interface Collecting {
  readonly cmd: RunningCommand;
  readonly result: Promise<CommandResultFrame>;
  /** Why the output cannot be trusted (a gap, too many bytes), or null; set while output arrives. */
  readonly state: { problem: string | null };
  kill(): Promise<void>;
}

async function startCollecting(
  commands: CommandStarter,
  o: TransferOptions,
  commandId: string,
  command: string,
  args: string[],
  stdout: { push(data: Buffer): unknown },
  stderr: Buffer[],
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<Collecting> {
  let bytes = 0;
  const state: { problem: string | null } = { problem: null };
  const cmd = await commands.start(
    o.agentId,
    { commandId, command, args, timeoutSeconds: Math.ceil((o.timeoutMs ?? DEFAULT_TRANSFER_TIMEOUT_MS) / 1000) + 5 },
    {
      output: (stream, data) => {
        if (stream !== 'stdout') {
          stderr.push(data);
          return;
        }
        bytes += data.length;
        if (bytes > maxBytes) {
          state.problem ??= `more than ${maxBytes} bytes`;
          void cmd.signal(SIGKILL).catch(() => undefined);
          return;
        }
        stdout.push(data);
      },
      gap: (g) => {
        state.problem ??= `output was lost in transfer (${g.lost_bytes} bytes)`;
      },
    },
  );
  const kill = (): Promise<void> => cmd.signal(SIGKILL).catch(() => undefined);
  const timeoutMs = o.timeoutMs ?? DEFAULT_TRANSFER_TIMEOUT_MS;
  const result = new Promise<CommandResultFrame>((resolve, reject) => {
    const stop = (why: string): void => {
      void kill();
      cmd.detach();
      reject(new Error(why));
    };
    const timer = setTimeout(() => stop(`${command} in the guest did not finish within ${Math.round(timeoutMs / 1000)} s`), timeoutMs);
    timer.unref();
    const onAbort = (): void => stop(`${command} in the guest was stopped: ${String(o.signal.reason)}`);
    o.signal.addEventListener('abort', onAbort, { once: true });
    cmd.result.then((r) => {
      clearTimeout(timer);
      o.signal.removeEventListener('abort', onAbort);
      resolve(r);
    }, reject);
  });
  return { cmd, result, kill, state };
}

function lastLine(chunks: Buffer[]): string {
  return Buffer.concat(chunks).toString('utf8').trim().split('\n').at(-1) ?? '';
}
