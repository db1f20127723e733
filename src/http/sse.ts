/**
 * Server-sent events over a uWS response: frame helpers and the SseSink the producers write to.
 *
 * Backpressure: uWS queues every byte a `res.write` could not hand to the kernel and returns
 * false. With an onWritable handler registered, uWS only drains that queue when something is
 * written from the handler, so when no producer writes on `onWritable` the sink writes a 2-byte
 * comment (`:\n`) to make uWS flush (probed: without it the queued tail stays stuck).
 */
import type { HttpResponse } from '@trufflesuite/uws-js-unofficial';
import type { RenderedBody } from './dispatch.js';
import type { SseSink } from './types.js';

/** Response headers of every SSE stream. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
};

/** The answer to HEAD on an SSE route: the stream's headers, no stream. */
export function sseHeadResponse(): RenderedBody {
  const { 'content-type': contentType = '', ...headers } = SSE_HEADERS;
  return { kind: 'body', status: 200, headers, contentType, body: '' };
}

/** Heartbeat comment written to every open stream (default every 15 s). */
export const SSE_HEARTBEAT = ': ping\n\n';

/**
 * One SSE event as text. Multi-line data becomes several `data:` lines. Encode the result once
 * and write the same bytes to every subscriber.
 */
export function sseFrame(ev: { data: string; event?: string; id?: string | number; retryMs?: number }): string {
  let out = '';
  if (ev.event !== undefined) out += `event: ${oneLine(ev.event)}\n`;
  if (ev.id !== undefined) out += `id: ${oneLine(String(ev.id))}\n`;
  if (ev.retryMs !== undefined) out += `retry: ${Math.max(0, Math.trunc(ev.retryMs))}\n`;
  for (const line of ev.data.split(/\r\n|\r|\n/)) out += `data: ${line}\n`;
  return `${out}\n`;
}

/** A comment frame (ignored by EventSource; keeps proxies and idle timers from closing the stream). */
export function sseComment(text: string): string {
  return `: ${oneLine(text)}\n\n`;
}

function oneLine(s: string): string {
  return s.replace(/[\r\n]/g, ' ');
}

/**
 * SseSink on a uWS response. The listener owns its lifetime; producers only see SseSink.
 *
 * The response head (status, headers, `: connected`) goes out in the same corked write as the
 * first frame, or when the listener calls `flushHead` (its producer has started, or a short hold
 * expired): a stream that begins with a replay page then reaches the client in one send instead
 * of a head packet and, a round trip to the agent's actor later, the page (measured: the split
 * cost a 10 MiB replay ≈ 0.5 ms on loopback, the client woken twice).
 */
export class UwsSseSink implements SseSink {
  readonly #res: HttpResponse;
  readonly #onError: (err: unknown) => void;
  #head: (() => void) | undefined;
  readonly #writable: Array<() => void> = [];
  readonly #closeCbs: Array<() => void> = [];
  #closed = false;
  #backpressured = false;
  #buffered = 0;
  #writes = 0;
  /** uWS copies what a write does not hand to the kernel at once into its own buffer. */
  readonly copiesWrites = true;

  /**
   * @param onError receives exceptions thrown by producer callbacks (logged by the listener).
   * @param head writes the response head on `res` (called inside a cork, once); omitted when the
   *   caller already wrote it.
   */
  constructor(res: HttpResponse, onError: (err: unknown) => void, head?: () => void) {
    this.#res = res;
    this.#onError = onError;
    this.#head = head;
    res.onWritable(() => this.#drain());
  }

  /** Sends the response head now if no frame has taken it along yet. */
  flushHead(): void {
    if (this.#closed || this.#head === undefined) return;
    this.#res.cork(() => this.#writeHead());
  }

  #writeHead(): void {
    const head = this.#head;
    this.#head = undefined;
    head?.();
  }

  write(frame: Uint8Array | string): boolean {
    if (this.#closed) return false;
    const res = this.#res;
    let ok = false;
    res.cork(() => {
      this.#writeHead();
      ok = res.write(frame);
    });
    this.#writes++;
    if (ok) {
      this.#backpressured = false;
      this.#buffered = 0;
    } else {
      this.#backpressured = true;
      this.#buffered += typeof frame === 'string' ? Buffer.byteLength(frame) : frame.byteLength;
    }
    return ok;
  }

  onWritable(cb: () => void): void {
    this.#writable.push(cb);
  }

  onClose(cb: () => void): void {
    if (this.#closed) this.#safe(cb);
    else this.#closeCbs.push(cb);
  }

  get closed(): boolean {
    return this.#closed;
  }

  get backpressured(): boolean {
    return this.#backpressured;
  }

  bufferedBytes(): number {
    return this.#buffered;
  }

  /** End the stream (terminating chunk). `closeConnection` is used when the server stops. */
  close(closeConnection = false): void {
    if (this.#closed) return;
    const res = this.#res;
    this.#closed = true;
    res.cork(() => {
      this.#writeHead();
      res.end(undefined, closeConnection);
    });
    this.#fireClose();
  }

  /** The client went away: the response must not be touched again. */
  aborted(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#head = undefined;
    this.#fireClose();
  }

  #drain(): boolean {
    if (this.#closed) return true;
    if (!this.#backpressured) return true;
    const before = this.#writes;
    this.#backpressured = false;
    for (const cb of this.#writable) {
      this.#safe(cb);
      if (this.#closed) return true;
    }
    if (this.#writes === before) this.write(':\n');
    return !this.#backpressured;
  }

  #fireClose(): void {
    for (const cb of this.#closeCbs.splice(0)) this.#safe(cb);
  }

  #safe(cb: () => void): void {
    try {
      cb();
    } catch (err) {
      this.#onError(err);
    }
  }
}
