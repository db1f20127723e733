/**
 * The MCP `run_command` tool's work: one command on a connected agent through the agent's actor
 * (the same AgentCommandClient path tasks use, so the output also lands in the command's replay
 * ring: GET /api/v1/agent-output/stream?command_id=<id>&replay=true shows all of it), its output
 * streamed to the caller while it runs and kept, bounded, for the result.
 *
 * Bounds (README "MCP"): the result keeps at most `maxOutputBytes` of each stream, the first and
 * the last half (bounded-output.ts), and says how many bytes it left out. Live, the caller gets
 * each stream's first `maxOutputBytes` as progress messages, then one message saying the rest is
 * not streamed, then at most one count-only progress a second, so a slow MCP client costs the
 * server a bounded amount of memory whatever the command prints. Lost output (an agent gap) is
 * reported in both, never silently dropped.
 *
 * Kill means kill: when the caller cancels the request or goes away, or no result came within
 * `timeoutSeconds` plus {@link kResultGraceMs} (the agent enforces `timeoutSeconds` itself), the
 * command's process group gets SIGTERM, then SIGKILL (runAgentCommand).
 */
import { randomUUID } from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import type { CommandGapFrame } from '../../actors/protocol/agent-frames.js';
import { SvcError } from '../core/errors.js';
import { runAgentCommand, type CommandStarter } from '../tasks/agent-run.js';
import { BoundedOutput } from './bounded-output.js';

/** Time after `timeoutSeconds` the server waits for the agent's own timeout result before killing (ms). */
export const kResultGraceMs = 15_000;
/** Least time between two count-only progress notifications once live streaming stopped (ms). */
export const kCountOnlyProgressMs = 1000;

/** The slice of the agents registry the tool needs. */
export interface AgentStatusLookup {
  get(agentId: string): { readonly status: string } | undefined;
}

export interface RunCommandRequest {
  readonly agentId: string;
  readonly command: string;
  readonly args: readonly string[];
  /** '' for the agent's work directory. */
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  readonly timeoutSeconds: number;
  /** Bound of each stream in the result and live (bytes). */
  readonly maxOutputBytes: number;
  /** The MCP request's signal: the caller cancelled or went away. */
  readonly signal: AbortSignal;
  /** A live progress notification; `progress` increases with every call. Absent: nothing is streamed. */
  readonly onProgress?: (progress: number, message: string | undefined) => void;
}

export interface StreamResult {
  readonly text: string;
  readonly total_bytes: number;
  readonly omitted_bytes: number;
}

/** The tool's structured result. */
export interface RunCommandResult {
  readonly agent_id: string;
  /** The command's id: its whole output can be replayed from the agent-output stream. */
  readonly command_id: string;
  /** The exit code, 128 + signal when a signal ended it, -1 when it could not start or no result came. */
  readonly exit_code: number;
  readonly stdout: StreamResult;
  readonly stderr: StreamResult;
  /** Output the agent lost (its buffer overflowed while disconnected): chunk ranges and bytes. */
  readonly gaps: readonly { first_seq: number; last_seq: number; lost_bytes: number; reason: string }[];
  /** `timeout_seconds` when the agent's timeout ended it, '' otherwise. */
  readonly timed_out_by: string;
  /** True when the caller's cancel or the server's backstop killed it. */
  readonly killed: boolean;
  /** The agent's error text ('' for a normal exit). */
  readonly error: string;
}

/** Runs the command; rejects with agent.not_found / server.unavailable / request.invalid when it cannot start. */
export async function runCommandForMcp(
  commands: CommandStarter,
  agents: AgentStatusLookup,
  r: RunCommandRequest,
): Promise<RunCommandResult> {
  const agent = agents.get(r.agentId);
  if (agent === undefined) throw new SvcError('agent.not_found', `no agent ${JSON.stringify(r.agentId.slice(0, 128))}`);
  if (agent.status === 'Disconnected') throw new SvcError('server.unavailable', `agent ${r.agentId} is disconnected`);
  const out = { stdout: new BoundedOutput(r.maxOutputBytes), stderr: new BoundedOutput(r.maxOutputBytes) };
  const live = new LiveProgress(r.maxOutputBytes, r.onProgress);
  const gaps: RunCommandResult['gaps'][number][] = [];
  // The server's backstop, after the agent's own timeout had its chance.
  const backstop = new AbortController();
  const timer = setTimeout(() => backstop.abort(), r.timeoutSeconds * 1000 + kResultGraceMs);
  timer.unref();
  const commandId = `mcp-${randomUUID()}`;
  try {
    const outcome = await runAgentCommand(commands, {
      agentId: r.agentId,
      commandId,
      argv: [r.command, ...r.args],
      cwd: r.cwd,
      env: r.env,
      timeoutSeconds: r.timeoutSeconds,
      signal: AbortSignal.any([r.signal, backstop.signal]),
      onOutput: (stream, data) => {
        out[stream].push(data);
        live.output(stream, data);
      },
      onGap: (gap: CommandGapFrame) => {
        gaps.push({ first_seq: gap.first_seq, last_seq: gap.last_seq, lost_bytes: gap.lost_bytes, reason: gap.reason });
        live.note(`[output lost: chunks ${gap.first_seq}-${gap.last_seq}, ${gap.lost_bytes} bytes (${gap.reason})]\n`);
      },
    });
    const kept = (s: BoundedOutput): StreamResult => {
      const k = s.kept();
      return { text: k.text, total_bytes: k.totalBytes, omitted_bytes: k.omittedBytes };
    };
    const error =
      outcome.error !== ''
        ? outcome.error
        : backstop.signal.aborted && !r.signal.aborted
          ? `no result within ${r.timeoutSeconds} s + grace`
          : '';
    return {
      agent_id: r.agentId,
      command_id: commandId,
      exit_code: outcome.exitCode,
      stdout: kept(out.stdout),
      stderr: kept(out.stderr),
      gaps,
      timed_out_by: outcome.timedOutBy,
      killed: outcome.killed,
      error,
    };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What the caller sees while the command runs: each stream's first `maxBytes` as text (decoded
 * across chunk boundaries; stderr marked), then count-only progress at most every
 * {@link kCountOnlyProgressMs}. `progress` is the output bytes seen, raised by at least 1 per
 * notification (MCP requires it to increase).
 */
class LiveProgress {
  readonly #maxBytes: number;
  readonly #send: ((progress: number, message: string | undefined) => void) | undefined;
  readonly #streamed = { stdout: 0, stderr: 0 };
  readonly #decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  readonly #cut = { stdout: false, stderr: false };
  #bytes = 0;
  #progress = 0;
  #lastCountOnlyMs = 0;

  constructor(maxBytes: number, send: ((progress: number, message: string | undefined) => void) | undefined) {
    this.#maxBytes = maxBytes;
    this.#send = send;
  }

  output(stream: 'stdout' | 'stderr', data: Buffer): void {
    this.#bytes += data.byteLength;
    if (this.#send === undefined) return;
    const room = this.#maxBytes - this.#streamed[stream];
    if (room > 0) {
      const piece = data.byteLength <= room ? data : data.subarray(0, room);
      this.#streamed[stream] += piece.byteLength;
      const text = this.#decoders[stream].write(piece);
      if (text !== '') this.#emit(stream === 'stderr' ? `[stderr] ${text}` : text);
      if (piece.byteLength === data.byteLength) return;
    }
    if (!this.#cut[stream]) {
      this.#cut[stream] = true;
      this.#emit(`[${stream} beyond ${this.#maxBytes} bytes is not streamed; the result keeps its tail]\n`);
      return;
    }
    const now = Date.now();
    if (now - this.#lastCountOnlyMs >= kCountOnlyProgressMs) {
      this.#lastCountOnlyMs = now;
      this.#emit(undefined);
    }
  }

  note(text: string): void {
    this.#emit(text);
  }

  #emit(message: string | undefined): void {
    this.#progress = Math.max(this.#bytes, this.#progress + 1);
    this.#send?.(this.#progress, message);
  }
}
