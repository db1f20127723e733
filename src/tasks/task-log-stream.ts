/**
 * One GET /api/v1/tasks/{id}/logs stream: the task log from the start (or after the client's
 * Last-Event-ID), then live records, then the end of the stream after the terminal record.
 *
 * Joining without losing or repeating a record: the stream subscribes to the live log FIRST and
 * holds what arrives, waits until everything appended before that is in the file, replays the
 * file (paced by the socket's backpressure: a replay never piles up in memory), then writes the
 * held records it did not replay (by seq), and from then on live records as they come.
 *
 * A client that cannot keep up (the live-subscriber rules, src/http/live-subscriber.ts): live
 * frames wait in a per-stream queue bounded by `maxQueuedBytes` (held frames during a replay count
 * too). Past it the stream gets one `event` frame `{"kind":"slow_subscriber","resume_after":<seq>}`
 * and is closed WITHOUT a terminal record, so an EventSource (or the sbx client) reconnects with Last-Event-ID and
 * resumes from the file. The task itself never waits for a subscriber.
 */
import { open } from 'node:fs/promises';
import { LiveSubscriber } from '../http/live-subscriber.js';
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

/** The task log's slow-consumer frame: resume with Last-Event-ID = resume_after. */
function slowLogFrame(cursor: string | undefined): string {
  const hint = {
    kind: 'slow_subscriber',
    resume_after: cursor === undefined ? null : Number(cursor),
    message: 'the client fell behind; reconnect with Last-Event-ID to resume',
  };
  return sseFrame({ event: 'event', data: JSON.stringify(hint) });
}

/**
 * Streams `log` to `sink` until the terminal record has been written (then closes it) or the
 * client goes away. Resolves when the replay part is done; never rejects (a file that cannot be
 * read ends the stream with an `error` frame, without an id, naming the failure).
 */
export async function streamTaskLog(log: TaskLog, sink: SseSink, opts: LogStreamOptions = {}): Promise<void> {
  let lastSeq = opts.afterSeq ?? 0;
  const sub = new LiveSubscriber(sink, {
    maxQueuedBytes: opts.maxQueuedBytes ?? DEFAULT_LOG_SUBSCRIBER_QUEUE_BYTES,
    slowFrame: slowLogFrame,
    holdLive: true,
    ...(lastSeq > 0 && { cursor: String(lastSeq) }),
  });
  const unsubscribe = log.subscribe({
    record: (frame, seq) => void sub.send(frame, String(seq)),
    end: () => sub.endWith(),
  });
  sub.onClose(unsubscribe);

  try {
    await log.flushed();
    for await (const rec of readRecords(log.path, log.writtenBytes)) {
      if (sub.closed) return;
      if (rec.seq <= lastSeq) continue;
      // Paced by the socket: a replay never piles up in memory.
      sub.sendReplay([{ frame: encodeLogRecord(rec), cursor: String(rec.seq) }]);
      lastSeq = rec.seq;
      await sub.whenDrained();
    }
  } catch (err) {
    unsubscribe();
    sub.resumeLive([], () => false);
    sub.endWith(Buffer.from(sseFrame({ event: 'error', data: `the task log could not be read: ${(err as Error).message}` })));
    return;
  }
  // The held records the file did not have (a held end passes: it has no cursor).
  sub.resumeLive([], (cursor) => cursor === undefined || Number(cursor) > lastSeq);
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
    if (typeof v.seq === 'number' && typeof v.event === 'string' && typeof v.data === 'string')
      return { seq: v.seq, event: v.event, data: v.data };
  } catch {
    // A torn or foreign line: skipped.
  }
  return null;
}
