/**
 * An EventSource over fetch, as an async iterator: works in Node 20 and browsers, sends headers
 * (Last-Event-ID), and reconnects with jittered exponential backoff, resuming after the last
 * event id seen (through the header, and through the URL for routes that resume by query,
 * such as `since=` of the events tail).
 *
 * Ending: the iterator returns when the signal aborts or the consumer breaks out of the loop;
 * with `reconnect: false` it also returns when the server ends the stream. A non-retryable
 * failure (a 4xx, or a response that is not text/event-stream) rejects with ApiError; a
 * retryable one (network, 5xx, 429, end of stream) reconnects.
 */
import { aborted, ApiError, errorFromResponse, isAbortError, networkError } from './api-error.js';
import { SseParser, type SseEvent } from './sse-parser.js';

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface SseStreamOptions {
  fetch: FetchLike;
  /** The URL for a (re)connection, given the last event id seen (undefined at first, unless `lastEventId` was given). */
  url: (lastEventId: string | undefined) => string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Resume after this id from the start (sent as Last-Event-ID). */
  lastEventId?: string;
  /** Reconnect after errors and after the server ends the stream. Default true. */
  reconnect?: boolean;
  /** First reconnect delay, ms (a `retry:` field from the server replaces it). Default 1000. */
  initialDelayMs?: number;
  /** Cap of the backoff, ms. Default 30 000. */
  maxDelayMs?: number;
  /** Give up after this many consecutive failed attempts (rejecting with the last error). Default Infinity. */
  maxAttempts?: number;
  /** Each (re)connection that got a stream. */
  onOpen?(info: { attempt: number; lastEventId: string | undefined }): void;
  /** Before waiting to reconnect: why, and for how long. */
  onReconnect?(info: { attempt: number; delayMs: number; error: ApiError | null }): void;
  /** Comment lines (heartbeats). */
  onComment?(text: string): void;
  /**
   * Before each reconnection: may replace the resume id (e.g. when the server restarted and its
   * ids started over). Failures are ignored (the id stays).
   */
  resumeFrom?(lastEventId: string | undefined): Promise<string | undefined>;
  /** Random source for jitter (tests). Default Math.random. */
  random?: () => number;
}

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'the server';
  }
}

/** Resolves after `ms`, or early (without rejecting) when the signal aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (aborted(signal)) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Delay of reconnect attempt `attempt` (1-based): base·2^(attempt-1), capped, with ±20 % jitter. */
export function backoffDelayMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const exp = Math.min(maxMs, baseMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return Math.max(0, Math.round(exp * (0.8 + 0.4 * random())));
}

/** Opens the stream and yields its events, reconnecting per the options. */
export async function* sseStream(opts: SseStreamOptions): AsyncGenerator<SseEvent, void, undefined> {
  const reconnect = opts.reconnect ?? true;
  const maxAttempts = opts.maxAttempts ?? Number.POSITIVE_INFINITY;
  const maxDelayMs = opts.maxDelayMs ?? 30_000;
  const random = opts.random ?? Math.random;
  let baseDelayMs = opts.initialDelayMs ?? 1000;
  let lastEventId = opts.lastEventId;
  let failures = 0;
  const signal = opts.signal;

  for (let attempt = 1; ; attempt++) {
    if (aborted(signal)) return;
    if (attempt > 1 && opts.resumeFrom !== undefined) {
      try {
        lastEventId = await opts.resumeFrom(lastEventId);
      } catch {
        // Keep the id; the connection attempt below reports what is wrong.
      }
    }
    let error: ApiError | null = null;
    const ctl = new AbortController();
    const abort = (): void => ctl.abort();
    signal?.addEventListener('abort', abort, { once: true });
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream', 'cache-control': 'no-cache', ...opts.headers };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const url = opts.url(lastEventId);
      let res: Response;
      try {
        res = await opts.fetch(url, { method: 'GET', headers, signal: ctl.signal });
      } catch (err) {
        if (isAbortError(err) || aborted(signal)) return;
        throw networkError(originOf(url), err);
      }
      if (!res.ok) {
        const text = await res.text().catch(() => '');
        throw errorFromResponse(res.status, res.statusText, text, res.headers.get('retry-after'));
      }
      const type = res.headers.get('content-type') ?? '';
      if (!type.toLowerCase().startsWith('text/event-stream') || res.body === null) {
        await res.body?.cancel().catch(() => undefined);
        throw new ApiError(res.status, 'protocol', `expected an event stream from ${url}, got ${type === '' ? 'no content type' : type}`);
      }
      opts.onOpen?.({ attempt, lastEventId });
      const queue: SseEvent[] = [];
      const parser = new SseParser(
        {
          onEvent: (e) => queue.push(e),
          onRetry: (ms) => {
            baseDelayMs = ms;
          },
          onComment: (text) => opts.onComment?.(text),
        },
        lastEventId,
      );
      const reader = res.body.getReader();
      try {
        for (;;) {
          let chunk: { done: true; value?: undefined } | { done: false; value: Uint8Array };
          try {
            chunk = (await reader.read()) as typeof chunk;
          } catch (err) {
            if (isAbortError(err) || aborted(signal)) return;
            throw networkError(originOf(url), err);
          }
          if (chunk.done) break;
          parser.push(chunk.value);
          while (queue.length > 0) {
            const ev = queue.shift() as SseEvent;
            lastEventId = ev.id;
            failures = 0;
            yield ev;
            if (aborted(signal)) return;
          }
        }
      } finally {
        // Runs on break/return from the consumer too: release the connection.
        ctl.abort();
        reader.releaseLock();
      }
      parser.end();
      lastEventId = parser.lastEventId;
      if (!reconnect) return;
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      if (!reconnect || !err.retryable) throw err;
      error = err;
      failures++;
      if (failures >= maxAttempts) throw err;
    } finally {
      signal?.removeEventListener('abort', abort);
    }
    const delayMs =
      error?.retryAfterSeconds !== undefined
        ? Math.min(maxDelayMs, error.retryAfterSeconds * 1000)
        : backoffDelayMs(Math.max(1, failures), baseDelayMs, maxDelayMs, random);
    opts.onReconnect?.({ attempt, delayMs, error });
    await sleep(delayMs, signal);
  }
}
