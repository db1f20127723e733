/**
 * The SseSink over a node:http(s) response, for the admin listener (src/http/mtls-listener.ts).
 * Same contract as the uWS sink (src/http/sse.ts): `write` returns false under backpressure (the
 * frame is queued all the same), `onWritable` callbacks run on 'drain', and `onClose` runs once
 * whether the producer, the client or the server ended the stream.
 */
import type { ServerResponse } from 'node:http';
import type { SseSink } from './types.js';

export class NodeSseSink implements SseSink {
  readonly #res: ServerResponse;
  readonly #onError: (err: unknown) => void;
  readonly #writable: Array<() => void> = [];
  readonly #closeCbs: Array<() => void> = [];
  #closed = false;
  #backpressured = false;

  /** @param onError receives exceptions thrown by producer callbacks (logged by the listener). */
  constructor(res: ServerResponse, onError: (err: unknown) => void) {
    this.#res = res;
    this.#onError = onError;
    res.on('drain', () => this.#drain());
    // 'close' after end() is the normal finish; before it, the client went away.
    res.on('close', () => this.aborted());
  }

  write(frame: Uint8Array | string): boolean {
    if (this.#closed) return false;
    const ok = this.#res.write(frame);
    this.#backpressured = !ok;
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

  /** Bytes node holds for this response and its socket, while backpressured (0 otherwise). */
  bufferedBytes(): number {
    return this.#backpressured ? this.#res.writableLength : 0;
  }

  /** End the stream (terminating chunk). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#res.end();
    this.#fireClose();
  }

  /** The client went away: nothing more is written. */
  aborted(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#fireClose();
  }

  #drain(): void {
    if (this.#closed || !this.#backpressured) return;
    this.#backpressured = false;
    for (const cb of this.#writable) {
      this.#safe(cb);
      if (this.#closed) return;
    }
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
