/**
 * Turns one command's raw reads into OutputChunks: assigns seq (per command, from 1, shared by
 * stdout, stderr and log) and per-stream byte offsets, cuts chunks at MAX_CHUNK_BYTES, and
 * coalesces small reads.
 *
 * Coalescing keeps interactive latency low and floods cheap:
 * - Output after a quiet spell (nothing emitted for FLUSH_INTERVAL_MS) leaves at the end of the
 *   current event-loop turn (setImmediate), so a keystroke echo goes within the turn it was read.
 * - Output that keeps coming is flushed at most once per FLUSH_INTERVAL_MS, so a flood becomes
 *   chunks of up to 64 KiB instead of one per read. node-pty hands out reads of at most 4 KiB
 *   (the line discipline's buffer), usually one per turn, and every message costs the same on
 *   each hop after this one (gRPC, the server's ring, the session hub, each WebSocket): measured
 *   with the `pty` bench and one observer, 4.7-5.1 MB/s with a chunk per read against 6.4-6.9
 *   MB/s paced, and the keystroke echo behind the flood at half the delay.
 * - A run that reaches 64 KiB is emitted at once.
 * Contiguous reads of one stream merge; a change of stream starts a new chunk, so the order of
 * stdout/stderr interleaving is kept.
 */
import type { ChunkEntry, OutputStreamName } from './output-buffer.js';

/** Largest OutputChunk.data, in bytes (64 KiB, proto/README.md). */
export const MAX_CHUNK_BYTES = 64 * 1024;

/**
 * Least time between two flushes of a command's pending output, in ms: the most a partial chunk
 * of continuing output waits. 2 ms measured best (1 ms gained nothing over a chunk per read, 4 ms
 * nothing over 2).
 */
export const FLUSH_INTERVAL_MS = 2;

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
  /** Least ms between two flushes of continuing output. Default FLUSH_INTERVAL_MS; 0 flushes every turn. */
  readonly flushIntervalMs?: number;
  readonly now?: () => number;
}

export class CommandOutput {
  readonly #commandId: string;
  readonly #emit: (chunk: ChunkEntry) => void;
  readonly #max: number;
  readonly #now: () => number;
  readonly #interval: number;
  readonly #offsets: Record<OutputStreamName, number> = { stdout: 0, stderr: 0, log: 0 };
  readonly #ended = new Set<OutputStreamName>();
  readonly #used = new Set<OutputStreamName>();
  #runs: Run[] = [];
  #seq = 0;
  /** Cancels the pending flush (an immediate or a timer), if one is scheduled. */
  #cancelScheduled: (() => void) | undefined;
  /** When a chunk was last emitted (now()), -Infinity before the first. */
  #lastEmitAt = -Infinity;

  constructor(opts: CommandOutputOptions) {
    this.#commandId = opts.commandId;
    this.#emit = opts.emit;
    this.#max = opts.maxChunkBytes ?? MAX_CHUNK_BYTES;
    this.#now = opts.now ?? Date.now;
    this.#interval = opts.flushIntervalMs ?? FLUSH_INTERVAL_MS;
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
    this.#unschedule();
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
    this.#unschedule();
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

  /** Flushes at the end of this turn after a quiet spell, else once the interval since the last chunk is up. */
  #schedule(): void {
    if (this.#cancelScheduled) return;
    const wait = this.#lastEmitAt + this.#interval - this.#now();
    const fire = (): void => {
      this.#cancelScheduled = undefined;
      this.flush();
    };
    if (wait <= 0) {
      const h = setImmediate(fire).unref();
      this.#cancelScheduled = () => clearImmediate(h);
    } else {
      const h = setTimeout(fire, wait).unref();
      this.#cancelScheduled = () => clearTimeout(h);
    }
  }

  #unschedule(): void {
    this.#cancelScheduled?.();
    this.#cancelScheduled = undefined;
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
    this.#lastEmitAt = this.#now();
    this.#emit({ kind: 'chunk', stream, commandId: this.#commandId, seq: this.#seq, offset, data, timestampMs, eof });
  }
}
