/**
 * Writing a streamed body (StreamResult: file downloads) on a uWS response, driven by backpressure.
 *
 * uWS's `tryEnd(chunk, totalSize)` hands the kernel what it takes and, unlike `write`, buffers
 * nothing of the rest: when it reports `ok === false` we keep the chunk, wait for `onWritable`
 * and resend from the response's write offset. The next chunk is pulled from the source only once
 * the previous one went out completely, so one response holds at most one chunk (plus the
 * socket's kernel buffer) however large the file: memory stays flat for a 1 GiB download.
 */
import type { HttpResponse } from '@trufflesuite/uws-js-unofficial';
import type { RenderedStream } from './dispatch.js';
import { statusLine } from './uws-io.js';

/** How a streamed response ended: sent whole, the client went away, or the source failed. */
export type StreamOutcome = 'sent' | 'aborted' | 'failed';

/** One streamed response on a uWS socket. The listener calls `abort()` from its onAborted. */
export class UwsStreamWriter {
  readonly #res: HttpResponse;
  readonly #r: RenderedStream;
  readonly #closeConnection: boolean;
  readonly #onEnd: (outcome: StreamOutcome, err?: unknown) => void;
  #ended = false;
  /** The chunk being sent and the response offset at which it started. */
  #pending: Uint8Array | null = null;
  #pendingStart = 0;

  constructor(
    res: HttpResponse,
    r: RenderedStream,
    opts: { closeConnection: boolean; onEnd: (outcome: StreamOutcome, err?: unknown) => void },
  ) {
    this.#res = res;
    this.#r = r;
    this.#closeConnection = opts.closeConnection;
    this.#onEnd = opts.onEnd;
  }

  /** Write the head and start pulling. `head` (a HEAD request) sends the head and Content-Length only. */
  start(head: boolean): void {
    const res = this.#res;
    const r = this.#r;
    res.cork(() => {
      res.writeStatus(statusLine(r.status));
      for (const [k, v] of Object.entries(r.headers)) {
        const lower = k.toLowerCase();
        if (lower !== 'content-length' && lower !== 'content-type') res.writeHeader(k, v);
      }
      res.writeHeader('content-type', r.contentType);
      if (head || r.lengthBytes === 0) res.endWithoutBody(r.lengthBytes, this.#closeConnection);
    });
    if (head || r.lengthBytes === 0) {
      this.#end('sent');
      return;
    }
    res.onWritable((offset) => this.#writable(offset));
    this.#pull();
  }

  /** The client went away (or the server force-closed it): stop and release the source. */
  abort(): void {
    this.#end('aborted');
  }

  #pull(): void {
    if (this.#ended) return;
    this.#r.source.next().then(
      (chunk) => this.#send(chunk),
      (err: unknown) => this.#fail(err),
    );
  }

  #send(chunk: Uint8Array | null): void {
    if (this.#ended) return;
    const res = this.#res;
    const total = this.#r.lengthBytes;
    const offset = res.getWriteOffset();
    if (chunk === null || chunk.byteLength === 0 || offset + chunk.byteLength > total) {
      // The file shrank or grew since its size was announced: the client must not take a short
      // or long body for the file, so the connection is cut.
      this.#fail(new Error(`the body source ended at ${offset} of ${total} bytes announced`));
      return;
    }
    this.#pending = chunk;
    this.#pendingStart = offset;
    let ok = false;
    let done = false;
    res.cork(() => {
      [ok, done] = res.tryEnd(chunk, total);
    });
    this.#after(ok, done);
  }

  #writable(offset: number): boolean {
    const chunk = this.#pending;
    if (this.#ended || chunk === null) return true;
    const rest = chunk.subarray(offset - this.#pendingStart);
    const [ok, done] = this.#res.tryEnd(rest, this.#r.lengthBytes);
    this.#after(ok, done);
    return ok;
  }

  #after(ok: boolean, done: boolean): void {
    if (done) {
      this.#pending = null;
      this.#end('sent');
    } else if (ok) {
      this.#pending = null;
      this.#pull();
    }
    // not ok: wait for onWritable with the chunk kept in #pending
  }

  #fail(err: unknown): void {
    if (this.#ended) return;
    this.#end('failed', err);
    this.#res.close();
  }

  #end(outcome: StreamOutcome, err?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#pending = null;
    this.#r.source.close().catch(() => undefined);
    this.#onEnd(outcome, err);
  }
}
