/**
 * Turns one command's raw reads into OutputChunks: assigns seq (per command, from 1, shared by
 * stdout, stderr and log) and per-stream byte offsets, cuts chunks at MAX_CHUNK_BYTES, and
 * coalesces small reads.
 *
 * Coalescing keeps interactive latency low: reads are collected only until the end of the
 * current event-loop turn (setImmediate), so a keystroke echo leaves within the same turn, while a
 * burst (node-pty delivers 4 KiB reads, up to dozens per turn) becomes a few 64 KiB chunks.
 * Contiguous reads of one stream merge; a change of stream starts a new chunk, so the order of
 * stdout/stderr interleaving is kept.
 */
import type { ChunkEntry, OutputStreamName } from './output-buffer.js';

/** Largest OutputChunk.data, in bytes (64 KiB, proto/README.md). */
export const MAX_CHUNK_BYTES = 64 * 1024;

interface Run {
  readonly stream: OutputStreamName;
  readonly parts: Buffer[];
  bytes: number;
  readonly firstAtMs: number;
}

export interface CommandOutputOptions {
  readonly commandId: string;
  /** Receives every chunk, in seq order. */
  readonly emit: (chunk: ChunkEntry) => void;
  /** Largest chunk, in bytes. Default MAX_CHUNK_BYTES. */
  readonly maxChunkBytes?: number;
  readonly now?: () => number;
}

export class CommandOutput {
  readonly #commandId: string;
  readonly #emit: (chunk: ChunkEntry) => void;
  readonly #max: number;
  readonly #now: () => number;
  readonly #offsets: Record<OutputStreamName, number> = { stdout: 0, stderr: 0, log: 0 };
  readonly #ended = new Set<OutputStreamName>();
  readonly #used = new Set<OutputStreamName>();
  #runs: Run[] = [];
  #seq = 0;
  #scheduled: NodeJS.Immediate | undefined;

  constructor(opts: CommandOutputOptions) {
    this.#commandId = opts.commandId;
    this.#emit = opts.emit;
    this.#max = opts.maxChunkBytes ?? MAX_CHUNK_BYTES;
    this.#now = opts.now ?? Date.now;
  }

  /** Last seq assigned (0 before any chunk). */
  get lastSeq(): number {
    return this.#seq;
  }

  /** Bytes written so far to a stream. */
  bytesOf(stream: OutputStreamName): number {
    return this.#offsets[stream] + this.#pendingBytes(stream);
  }

  /** True once anything was written to (or ended on) the stream. */
  used(stream: OutputStreamName): boolean {
    return this.#used.has(stream);
  }

  /** Queues data of a stream; ignored after end(stream). */
  write(stream: OutputStreamName, data: Buffer): void {
    if (data.length === 0 || this.#ended.has(stream)) return;
    this.#used.add(stream);
    let run = this.#runs.at(-1);
    if (run?.stream !== stream) {
      run = { stream, parts: [], bytes: 0, firstAtMs: this.#now() };
      this.#runs.push(run);
    }
    run.parts.push(data);
    run.bytes += data.length;
    if (run.bytes >= this.#max) this.#emitFullChunks();
    this.#schedule();
  }

  /** Emits the full-size chunks of the last run now; the remainder keeps coalescing. */
  #emitFullChunks(): void {
    // Earlier runs are complete (a later run exists), so they go first, whole.
    while (this.#runs.length > 1) this.#emitRun(this.#runs.shift() as Run, false);
    const run = this.#runs[0];
    if (!run) return;
    const whole = run.parts.length === 1 ? (run.parts[0] as Buffer) : Buffer.concat(run.parts, run.bytes);
    const fullBytes = whole.length - (whole.length % this.#max);
    for (let at = 0; at < fullBytes; at += this.#max) this.#emitChunk(run.stream, whole.subarray(at, at + this.#max), run.firstAtMs, false);
    const rest = whole.subarray(fullBytes);
    this.#runs = rest.length > 0 ? [{ stream: run.stream, parts: [rest], bytes: rest.length, firstAtMs: this.#now() }] : [];
  }

  /** Emits everything queued now (no eof). */
  flush(): void {
    if (this.#scheduled) {
      clearImmediate(this.#scheduled);
      this.#scheduled = undefined;
    }
    const runs = this.#runs;
    this.#runs = [];
    for (const run of runs) this.#emitRun(run, false);
  }

  /**
   * Ends a stream: flushes, and marks its last chunk eof (an empty eof chunk when nothing of the
   * stream is pending). Idempotent.
   */
  end(stream: OutputStreamName): void {
    if (this.#ended.has(stream)) return;
    this.#ended.add(stream);
    this.#used.add(stream);
    if (this.#scheduled) {
      clearImmediate(this.#scheduled);
      this.#scheduled = undefined;
    }
    const runs = this.#runs;
    this.#runs = [];
    let lastOfStream = -1;
    runs.forEach((r, i) => {
      if (r.stream === stream) lastOfStream = i;
    });
    runs.forEach((r, i) => this.#emitRun(r, i === lastOfStream));
    if (lastOfStream < 0) this.#emitChunk(stream, Buffer.alloc(0), this.#now(), true);
  }

  #pendingBytes(stream: OutputStreamName): number {
    let n = 0;
    for (const r of this.#runs) if (r.stream === stream) n += r.bytes;
    return n;
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = setImmediate(() => {
      this.#scheduled = undefined;
      this.flush();
    });
    this.#scheduled.unref();
  }

  #emitRun(run: Run, eof: boolean): void {
    // One copy per run (not per read); slices of it share the memory.
    const whole = run.parts.length === 1 ? (run.parts[0] as Buffer) : Buffer.concat(run.parts, run.bytes);
    for (let at = 0; at < whole.length; at += this.#max) {
      const end = Math.min(whole.length, at + this.#max);
      this.#emitChunk(run.stream, whole.subarray(at, end), run.firstAtMs, eof && end === whole.length);
    }
  }

  #emitChunk(stream: OutputStreamName, data: Buffer, timestampMs: number, eof: boolean): void {
    this.#seq += 1;
    const offset = this.#offsets[stream];
    this.#offsets[stream] += data.length;
    this.#emit({ kind: 'chunk', stream, commandId: this.#commandId, seq: this.#seq, offset, data, timestampMs, eof });
  }
}
