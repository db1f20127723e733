/**
 * A task's log: what GET /api/v1/tasks/{id}/logs streams, live and after the task ended.
 *
 * Records are numbered (seq 1, 2, …; the SSE event id) and appended to
 * `<stateDir>/tasks/<task_id>/log.ndjson`, one JSON object per line:
 *
 *   {"seq":7,"event":"stdout","data":"…text…"}
 *
 * `event` is one of the spec's SSE event names (stdout, stderr, event, completed, error). Each
 * record's SSE frame is encoded once, at append, and handed to every live subscriber; a late
 * subscriber reads the file first (task-log-stream.ts), so a log replays from the start for as
 * long as the task is remembered.
 *
 * Bounded by bytes: once `maxBytes` of records are in the file, further output records (stdout,
 * stderr and stream-json events) are dropped, announced by ONE `event` record
 * `{"kind":"truncated","max_bytes":N}`; state changes and the terminal record are always kept
 * (they are few and small). Exactly one terminal record (`completed` or `error`) ends the log;
 * nothing is appended after it.
 *
 * Writes are batched (one write per burst of records, in order) and never block the caller; the
 * file is closed once the terminal record is written (or by close()). A write failure is
 * reported once through `onError`; the log then stays live-only.
 */
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { sseFrame } from '../http/sse.js';

/** The SSE event names of the task log (spec 4.6). */
export type TaskLogEventName = 'stdout' | 'stderr' | 'event' | 'completed' | 'error';

/** One record as stored and replayed. */
export interface TaskLogRecord {
  readonly seq: number;
  readonly event: TaskLogEventName;
  readonly data: string;
}

/** Default cap of one task's log file (16 MiB). */
export const DEFAULT_TASK_LOG_MAX_BYTES = 16 * 1024 * 1024;

/** Live subscriber: every record's pre-encoded frame, then `end` once after the terminal record. */
export interface TaskLogListener {
  record(frame: Uint8Array, seq: number): void;
  end(): void;
}

export interface TaskLogOptions {
  /** The file (its directory is created). */
  readonly path: string;
  /** Default {@link DEFAULT_TASK_LOG_MAX_BYTES}. */
  readonly maxBytes?: number;
  /** A write failed (called once); the log continues live-only. */
  readonly onError?: (err: unknown) => void;
}

/** The SSE frame of a record (the same bytes live and on replay). */
export function encodeLogRecord(rec: TaskLogRecord): Uint8Array {
  return Buffer.from(sseFrame({ event: rec.event, id: rec.seq, data: rec.data }), 'utf8');
}

export class TaskLog {
  readonly path: string;
  readonly #maxBytes: number;
  readonly #onError: ((err: unknown) => void) | undefined;
  readonly #listeners = new Set<TaskLogListener>();
  #seq = 0;
  /** Bytes of records accepted (written or waiting to be). */
  #acceptedBytes = 0;
  #truncated = false;
  #finished = false;
  #pending: string[] = [];
  #pendingLastSeq = 0;
  #writtenBytes = 0;
  #writtenSeq = 0;
  #writing: Promise<void> | null = null;
  #fh: FileHandle | null = null;
  #broken = false;
  readonly #waiters: Array<{ seq: number; resolve: () => void }> = [];

  constructor(opts: TaskLogOptions) {
    this.path = opts.path;
    this.#maxBytes = opts.maxBytes ?? DEFAULT_TASK_LOG_MAX_BYTES;
    this.#onError = opts.onError;
  }

  /** seq of the newest record (0 when empty). */
  get lastSeq(): number {
    return this.#seq;
  }

  /** True once the terminal record was appended. */
  get finished(): boolean {
    return this.#finished;
  }

  /** Bytes in the file that hold complete records (a reader may read up to here). */
  get writtenBytes(): number {
    return this.#writtenBytes;
  }

  /**
   * Append an output record (stdout, stderr, or a stream-json `event`). Dropped (returns null)
   * once the log is over its byte cap or finished.
   */
  append(event: 'stdout' | 'stderr' | 'event', data: string): number | null {
    if (this.#finished) return null;
    if (this.#truncated) return null;
    if (this.#acceptedBytes + Buffer.byteLength(data) + 48 > this.#maxBytes) {
      this.#truncated = true;
      this.#add(
        'event',
        JSON.stringify({
          kind: 'truncated',
          max_bytes: this.#maxBytes,
          message: `the task log reached ${this.#maxBytes} bytes; later output is not kept`,
        }),
      );
      return null;
    }
    return this.#add(event, data);
  }

  /** Append a structured `event` that is always kept (state changes, gaps): never truncated. */
  appendEssential(data: Record<string, unknown>): number | null {
    if (this.#finished) return null;
    return this.#add('event', JSON.stringify(data));
  }

  /** Append the terminal record and end every live subscription after it. Idempotent. */
  finish(event: 'completed' | 'error', data: string): void {
    if (this.#finished) return;
    this.#add(event, data);
    this.#finished = true;
    for (const l of [...this.#listeners]) l.end();
    this.#listeners.clear();
  }

  /**
   * Live records from now on. On a finished log `end` is called at once (the caller replays the
   * file). Returns the unsubscribe function.
   */
  subscribe(listener: TaskLogListener): () => void {
    if (this.#finished) {
      listener.end();
      return () => undefined;
    }
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Resolves once every record appended so far is in the file (or the file is broken). */
  flushed(): Promise<void> {
    const target = this.#seq;
    if (this.#writtenSeq >= target || this.#broken) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ seq: target, resolve }));
  }

  /** Waits for pending writes, then closes the file. Idempotent; never rejects. */
  async close(): Promise<void> {
    await this.flushed();
    await this.#writing;
    const fh = this.#fh;
    this.#fh = null;
    this.#broken = true;
    await fh?.close().catch(() => undefined);
  }

  #add(event: TaskLogEventName, data: string): number {
    const seq = ++this.#seq;
    const rec: TaskLogRecord = { seq, event, data };
    const line = `${JSON.stringify(rec)}\n`;
    this.#acceptedBytes += Buffer.byteLength(line);
    if (!this.#broken) {
      this.#pending.push(line);
      this.#pendingLastSeq = seq;
      this.#writing ??= this.#writeLoop();
    } else {
      this.#writtenSeq = seq;
    }
    if (this.#listeners.size > 0) {
      const frame = encodeLogRecord(rec);
      for (const l of this.#listeners) l.record(frame, seq);
    }
    return seq;
  }

  async #writeLoop(): Promise<void> {
    try {
      if (this.#fh === null) {
        await mkdir(dirname(this.path), { recursive: true });
        this.#fh = await open(this.path, 'a', 0o600);
      }
      while (this.#pending.length > 0 && this.#fh !== null) {
        const batch = this.#pending.join('');
        const lastSeq = this.#pendingLastSeq;
        this.#pending = [];
        const bytes = Buffer.from(batch, 'utf8');
        let off = 0;
        while (off < bytes.length) off += (await this.#fh.write(bytes, off, bytes.length - off)).bytesWritten;
        this.#writtenBytes += bytes.length;
        this.#settle(lastSeq);
      }
      // A finished log gets no more records: its file is closed as soon as the last one is written.
      if (this.#finished && this.#pending.length === 0 && this.#fh !== null) {
        const fh = this.#fh;
        this.#fh = null;
        this.#broken = true;
        await fh.close();
      }
    } catch (err) {
      this.#broken = true;
      this.#pending = [];
      this.#onError?.(err);
      this.#settle(this.#seq);
    } finally {
      this.#writing = null;
    }
    // Records appended after the loop's last check (the loop ended between two awaits).
    if (this.#pending.length > 0 && !this.#broken) this.#writing = this.#writeLoop();
  }

  #settle(seq: number): void {
    this.#writtenSeq = seq;
    for (let i = this.#waiters.length - 1; i >= 0; i--) {
      const w = this.#waiters[i] as { seq: number; resolve: () => void };
      if (w.seq <= seq) {
        this.#waiters.splice(i, 1);
        w.resolve();
      }
    }
  }
}
