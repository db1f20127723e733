/**
 * Task progress from the coding agent's output (spec 2: output_bytes, tool_calls, current_tool,
 * last_activity_at). stdout is read as stream-json, one JSON object per line, as Claude Code
 * writes it with `--output-format stream-json`:
 *
 *   {"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Edit",…}]}}
 *   {"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1",…}]}}
 *
 * A tool_use block counts one tool call (once per id) and becomes current_tool until its
 * tool_result arrives (then the most recent still-open tool, or null). Lines that are not JSON,
 * and lines longer than `maxLineBytes`, count as output and are otherwise ignored: a coding agent
 * that prints plain text still shows output_bytes and activity. stderr counts bytes only.
 */
import type { TaskProgress } from './task-state.js';

/** Longest stdout line parsed as JSON (bytes); longer lines are skipped (default 1 MiB). */
export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;
/** Tool-use ids remembered for de-duplication. */
const MAX_SEEN_IDS = 100_000;
/** Tool calls tracked as open at once (results that never come must not grow memory). */
const MAX_OPEN_CALLS = 1000;

export interface StreamJsonProgressOptions {
  readonly now?: () => Date;
  readonly maxLineBytes?: number;
  /** Each parsed stdout object (for the task log's `event` frames). */
  readonly onEvent?: (event: Record<string, unknown>) => void;
  /** Each tool call as the stream shows it (the activity store's self-collector listens): ids and names only. */
  readonly onToolCall?: (call: ToolCallSeen) => void;
}

/**
 * A tool call seen in the stream: `started` at its tool_use block, `finished` at its tool_result
 * (isError from the result's is_error, null when absent). Never the tool's input or output.
 */
export interface ToolCallSeen {
  readonly phase: 'started' | 'finished';
  readonly id: string;
  /** The tool's name (at most 200 characters); null for a result whose tool_use was not seen. */
  readonly name: string | null;
  readonly isError: boolean | null;
}

type Block = { type?: unknown; id?: unknown; name?: unknown; tool_use_id?: unknown; is_error?: unknown };

export class StreamJsonProgress {
  readonly #opts: StreamJsonProgressOptions;
  readonly #maxLine: number;
  readonly #progress: TaskProgress;
  /** Pieces of the current, unterminated stdout line. */
  #partial: Buffer[] = [];
  #partialBytes = 0;
  /** The current line exceeded maxLineBytes: drop bytes until the next newline. */
  #skipping = false;
  readonly #seen = new Set<string>();
  /** Open tool calls, id → name, in call order. */
  readonly #open = new Map<string, string>();

  constructor(startedAt: Date, opts: StreamJsonProgressOptions = {}) {
    this.#opts = opts;
    this.#maxLine = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.#progress = { output_bytes: 0, tool_calls: 0, current_tool: null, last_activity_at: startedAt.toISOString() };
  }

  /** Feed a chunk of output as it arrives. */
  push(chunk: Uint8Array, stream: 'stdout' | 'stderr'): void {
    if (chunk.byteLength === 0) return;
    this.#progress.output_bytes += chunk.byteLength;
    this.#progress.last_activity_at = (this.#opts.now ?? (() => new Date()))().toISOString();
    if (stream !== 'stdout') return;
    const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let start = 0;
    for (let nl = buf.indexOf(10, start); nl >= 0; nl = buf.indexOf(10, start)) {
      this.#append(buf.subarray(start, nl));
      this.#finishLine();
      start = nl + 1;
    }
    if (start < buf.length) this.#append(buf.subarray(start));
  }

  /** The output ended: parse a last line that had no newline. */
  end(): void {
    this.#finishLine();
  }

  /** A copy of the counters. */
  snapshot(): TaskProgress {
    return { ...this.#progress };
  }

  #append(piece: Buffer): void {
    if (this.#skipping || piece.length === 0) return;
    if (this.#partialBytes + piece.length > this.#maxLine) {
      this.#skipping = true;
      this.#partial = [];
      this.#partialBytes = 0;
      return;
    }
    // Copy: the caller may reuse its buffer after push() returns.
    this.#partial.push(Buffer.from(piece));
    this.#partialBytes += piece.length;
  }

  #finishLine(): void {
    const line = this.#partial.length === 1 ? (this.#partial[0] as Buffer) : Buffer.concat(this.#partial, this.#partialBytes);
    this.#partial = [];
    this.#partialBytes = 0;
    if (this.#skipping) {
      this.#skipping = false;
      return;
    }
    const text = line.toString('utf8').trim();
    if (!text.startsWith('{')) return;
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return;
    this.#observe(obj as Record<string, unknown>);
    this.#opts.onEvent?.(obj as Record<string, unknown>);
  }

  #observe(obj: Record<string, unknown>): void {
    // A final result ends every open call.
    if (obj['type'] === 'result') {
      this.#open.clear();
      this.#progress.current_tool = null;
      return;
    }
    const message = obj['message'];
    const content = typeof message === 'object' && message !== null ? (message as { content?: unknown }).content : undefined;
    if (!Array.isArray(content)) return;
    for (const block of content as Block[]) {
      if (typeof block !== 'object' || block === null) continue;
      if (block.type === 'tool_use' && typeof block.name === 'string') {
        const id = typeof block.id === 'string' ? block.id : `anon-${this.#progress.tool_calls}`;
        if (this.#seen.has(id)) continue;
        if (this.#seen.size >= MAX_SEEN_IDS) this.#seen.clear();
        this.#seen.add(id);
        this.#progress.tool_calls++;
        if (this.#open.size >= MAX_OPEN_CALLS) this.#open.delete(this.#open.keys().next().value as string);
        this.#open.set(id, block.name.slice(0, 200));
        this.#progress.current_tool = block.name.slice(0, 200);
        this.#opts.onToolCall?.({ phase: 'started', id, name: block.name.slice(0, 200), isError: null });
      } else if (block.type === 'tool_result' && typeof block.tool_use_id === 'string') {
        const name = this.#open.get(block.tool_use_id) ?? null;
        this.#open.delete(block.tool_use_id);
        this.#progress.current_tool = [...this.#open.values()].at(-1) ?? null;
        if (this.#seen.has(block.tool_use_id))
          this.#opts.onToolCall?.({
            phase: 'finished',
            id: block.tool_use_id,
            name,
            isError: typeof block.is_error === 'boolean' ? block.is_error : null,
          });
      }
    }
  }
}
