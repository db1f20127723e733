/**
 * One GET /api/v1/tasks/{id}/logs stream: the task log from the start (or after the client's
 * Last-Event-ID), then live records, then the end of the stream after the terminal record.
 *
 * Joining without losing or repeating a record: the stream subscribes to the live log FIRST and
 * holds what arrives, waits until everything appended before that is in the file, replays the
 * file (paced by the socket's backpressure: a replay never piles up in memory), then writes the
 * held records it did not replay (by seq), and from then on live records as they come.
 *
 * A client that cannot keep up: live frames wait in a per-stream queue bounded by
 * `maxQueuedBytes` (held frames during a replay count too). Past it the stream gets one
 * `event` frame `{"kind":"slow_subscriber","resume_after":<seq>}` and is closed WITHOUT a
 * terminal record, so an EventSource (or the sbx client) reconnects with Last-Event-ID and
 * resumes from the file. The task itself never waits for a subscriber.
 */
import { open } from 'node:fs/promises';
import { sseFrame } from '../http/sse.js';
import type { SseSink } from '../http/types.js';
import { encodeLogRecord, type TaskLog, type TaskLogRecord } from './task-log.js';

/** Default bound of frames waiting for one slow log subscriber (1 MiB). */
export const DEFAULT_LOG_SUBSCRIBER_QUEUE_BYTES = 1024 * 1024;
const READ_CHUNK_BYTES = 64 * 1024;

export interface LogStreamOptions {
  /** Only records with a larger seq (the client's Last-Event-ID); default 0. */
  readonly afterSeq?: number;
  /** Default {@link DEFAULT_LOG_SUBSCRIBER_QUEUE_BYTES}. */
  readonly maxQueuedBytes?: number;
}

/** `Last-Event-ID` as a seq: a non-negative integer, anything else → 0 (from the start). */
export function parseLastEventId(header: string | undefined): number {
  if (header === undefined || !/^\d{1,15}$/u.test(header.trim())) return 0;
  return Number(header.trim());
}

/**
 * Streams `log` to `sink` until the terminal record has been written (then closes it) or the
 * client goes away. Resolves when the replay part is done; never rejects (a file that cannot be
 * read ends the stream with an `error` frame, without an id, naming the failure).
 */
export async function streamTaskLog(log: TaskLog, sink: SseSink, opts: LogStreamOptions = {}): Promise<void> {
  const writer = new FrameWriter(sink, opts.maxQueuedBytes ?? DEFAULT_LOG_SUBSCRIBER_QUEUE_BYTES);
  let holding = true;
  let ended = false;
  const held: Array<{ frame: Uint8Array; seq: number }> = [];
  let heldBytes = 0;
  const unsubscribe = log.subscribe({
    record(frame, seq) {
      if (!holding) {
        writer.send(frame, seq);
        return;
      }
      held.push({ frame, seq });
      heldBytes += frame.byteLength;
      if (heldBytes > writer.maxQueuedBytes) writer.slow();
    },
    end() {
      if (holding) ended = true;
      else writer.end();
    },
  });
  sink.onClose(unsubscribe);

  let lastSeq = opts.afterSeq ?? 0;
  try {
    await log.flushed();
    for await (const rec of readRecords(log.path, log.writtenBytes)) {
      if (sink.closed) return;
      if (rec.seq <= lastSeq) continue;
      await writer.sendPaced(encodeLogRecord(rec), rec.seq);
      lastSeq = rec.seq;
    }
  } catch (err) {
    unsubscribe();
    writer.send(Buffer.from(sseFrame({ event: 'error', data: `the task log could not be read: ${(err as Error).message}` })), undefined);
    writer.end();
    return;
  }
  holding = false;
  for (const h of held) if (h.seq > lastSeq) writer.send(h.frame, h.seq);
  held.length = 0;
  if (ended) writer.end();
}

/** The records of a log file, up to `limitBytes` (only whole lines; unparsable lines skipped). */
export async function* readRecords(path: string, limitBytes: number): AsyncGenerator<TaskLogRecord> {
  if (limitBytes <= 0) return;
  let fh;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return;
    throw err;
  }
  try {
    const buf = Buffer.allocUnsafe(READ_CHUNK_BYTES);
    let pos = 0;
    // The start of a line that continues into the next read (copied: buf is reused).
    let carry: Buffer | null = null;
    while (pos < limitBytes) {
      const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, limitBytes - pos), pos);
      if (bytesRead === 0) break;
      pos += bytesRead;
      let start = 0;
      for (let nl = buf.indexOf(10, start); nl >= 0 && nl < bytesRead; nl = buf.indexOf(10, start)) {
        const piece = buf.subarray(start, nl);
        const line = carry === null ? piece.toString('utf8') : Buffer.concat([carry, piece]).toString('utf8');
        carry = null;
        start = nl + 1;
        const rec = parseRecord(line);
        if (rec !== null) yield rec;
      }
      if (start < bytesRead) {
        const rest = Buffer.from(buf.subarray(start, bytesRead));
        carry = carry === null ? rest : Buffer.concat([carry, rest]);
      }
    }
  } finally {
    await fh.close();
  }
}

function parseRecord(line: string): TaskLogRecord | null {
  if (line === '') return null;
  try {
    const v = JSON.parse(line) as Partial<TaskLogRecord>;
    if (typeof v.seq === 'number' && typeof v.event === 'string' && typeof v.data === 'string') return { seq: v.seq, event: v.event, data: v.data };
  } catch {
    // A torn or foreign line: skipped.
  }
  return null;
}

/** Writes frames to one sink: straight through while it keeps up, queued (bounded) when it does not. */
class FrameWriter {
  readonly maxQueuedBytes: number;
  readonly #sink: SseSink;
  #queue: Array<{ frame: Uint8Array; seq: number | undefined }> = [];
  #queuedBytes = 0;
  #blocked = false;
  #ending = false;
  #lastSeq: number | undefined;
  #paced: (() => void) | null = null;

  constructor(sink: SseSink, maxQueuedBytes: number) {
    this.#sink = sink;
    this.maxQueuedBytes = maxQueuedBytes;
    sink.onWritable(() => this.#drain());
    sink.onClose(() => {
      this.#queue = [];
      this.#paced?.();
    });
  }

  send(frame: Uint8Array, seq: number | undefined): void {
    if (this.#sink.closed) return;
    if (this.#blocked || this.#queue.length > 0) {
      this.#queue.push({ frame, seq });
      this.#queuedBytes += frame.byteLength;
      if (this.#queuedBytes + this.#sink.bufferedBytes() > this.maxQueuedBytes) this.slow();
      return;
    }
    this.#write(frame, seq);
  }

  /** Replay: waits until the sink has room, then writes (not counted against the queue bound). */
  async sendPaced(frame: Uint8Array, seq: number): Promise<void> {
    while ((this.#blocked || this.#queue.length > 0) && !this.#sink.closed) {
      await new Promise<void>((resolve) => (this.#paced = resolve));
    }
    this.#paced = null;
    this.send(frame, seq);
  }

  /** Close once everything queued is written. */
  end(): void {
    this.#ending = true;
    if (this.#queue.length === 0) this.#sink.close();
  }

  /** Cut a subscriber that fell behind: one hint frame, then close without a terminal record. */
  slow(): void {
    if (this.#sink.closed) return;
    this.#queue = [];
    this.#queuedBytes = 0;
    const hint = { kind: 'slow_subscriber', resume_after: this.#lastSeq ?? null, message: 'the client fell behind; reconnect with Last-Event-ID to resume' };
    this.#sink.write(sseFrame({ event: 'event', data: JSON.stringify(hint) }));
    this.#sink.close();
  }

  #write(frame: Uint8Array, seq: number | undefined): void {
    if (seq !== undefined) this.#lastSeq = seq;
    if (!this.#sink.write(frame)) this.#blocked = true;
  }

  #drain(): void {
    this.#blocked = false;
    let i = 0;
    while (i < this.#queue.length && !this.#blocked && !this.#sink.closed) {
      const q = this.#queue[i++] as { frame: Uint8Array; seq: number | undefined };
      this.#queuedBytes -= q.frame.byteLength;
      this.#write(q.frame, q.seq);
    }
    this.#queue = this.#queue.slice(i);
    if (this.#queue.length === 0 && this.#ending) this.#sink.close();
    if (!this.#blocked && this.#queue.length === 0) {
      const p = this.#paced;
      this.#paced = null;
      p?.();
    }
  }
}
