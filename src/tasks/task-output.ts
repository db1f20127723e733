/**
 * Where the coding agent's output goes while a task runs: progress (StreamJsonProgress → the
 * task record), the task log (stdout/stderr text, each parsed stream-json object as an `event`
 * record `{"kind":"stream_json","event":{…}}`, gaps as `{"kind":"gap",…}`), and the stderr tail
 * quoted when the command fails.
 *
 * Output arrives as bytes in arbitrary chunks; it is decoded per stream with a StringDecoder, so a
 * character split between two chunks is never mangled.
 */
import { StringDecoder } from 'node:string_decoder';
import type { CommandGapFrame } from '../../actors/protocol/agent-frames.js';
import type { AgentRunOutcome } from './agent-run.js';
import { StreamJsonProgress, type ToolCallSeen } from './progress.js';
import type { TaskLog } from './task-log.js';
import type { TaskProgress } from './task-state.js';

/** Characters of stderr kept for the failure message. */
const STDERR_TAIL_CHARS = 2048;

export class TaskOutput {
  readonly #log: TaskLog;
  readonly #progress: StreamJsonProgress;
  readonly #onProgress: (p: TaskProgress) => void;
  readonly #decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  #stderrTail = '';

  constructor(
    log: TaskLog,
    onProgress: (p: TaskProgress) => void,
    now: () => Date = () => new Date(),
    onToolCall?: (call: ToolCallSeen) => void,
  ) {
    this.#log = log;
    this.#onProgress = onProgress;
    this.#progress = new StreamJsonProgress(now(), {
      now,
      onEvent: (event) => {
        log.append('event', JSON.stringify({ kind: 'stream_json', event }));
      },
      ...(onToolCall !== undefined && { onToolCall }),
    });
  }

  output(stream: 'stdout' | 'stderr', data: Buffer): void {
    this.#progress.push(data, stream);
    this.#onProgress(this.#progress.snapshot());
    const text = this.#decoders[stream].write(data);
    if (text === '') return;
    this.#log.append(stream, text);
    if (stream === 'stderr') this.#stderrTail = (this.#stderrTail + text).slice(-STDERR_TAIL_CHARS);
  }

  gap(gap: CommandGapFrame): void {
    this.#log.appendEssential({
      kind: 'gap',
      first_seq: gap.first_seq,
      last_seq: gap.last_seq,
      lost_bytes: gap.lost_bytes,
      reason: gap.reason,
    });
  }

  /** The output ended: flush partial characters and a last unterminated stream-json line. */
  end(): void {
    for (const stream of ['stdout', 'stderr'] as const) {
      const rest = this.#decoders[stream].end();
      if (rest !== '') this.#log.append(stream, rest);
    }
    this.#progress.end();
    this.#onProgress(this.#progress.snapshot());
  }

  /** The last non-empty stderr line (at most 300 characters), or ''. */
  lastStderrLine(): string {
    const lines = this.#stderrTail
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '');
    const last = lines.at(-1) ?? '';
    return last.length > 300 ? `${last.slice(0, 299)}…` : last;
  }
}

/**
 * The task error for a command that did not exit 0 (the task is not already finished).
 * `timeoutText` is the manifest's lifecycle.timeout, e.g. `30m`.
 */
export function describeFailure(o: AgentRunOutcome, timeoutText: string, lastStderr: string): string {
  if (o.timedOutBy === 'timeout_seconds')
    return `lifecycle.timeout (${timeoutText}) expired (enforced by the agent); the process group was killed`;
  if (!o.resultReceived) return `the coding agent's result was lost: ${o.error}`;
  if (o.exitCode === -1) return `the coding agent could not run: ${o.error || 'no reason given'}`;
  const why =
    o.exitCode > 128 && o.exitCode < 128 + 65
      ? `was killed by signal ${o.exitCode - 128} (exit code ${o.exitCode})`
      : `exited with code ${o.exitCode}`;
  return `the coding agent ${why}${lastStderr !== '' ? `: ${lastStderr}` : ''}`;
}
