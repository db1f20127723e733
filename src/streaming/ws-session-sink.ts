/**
 * A dashboard WebSocket connection's attachment to one session: the FrameSink a session hub
 * (src/sessions/session-hub.ts) writes to as if it were the connection. One connection may be
 * attached to several sessions, so closing an attachment (the hub does on a fatal error, a slow
 * consumer, a leave or the session's end) detaches that session only: the connection and its
 * other attachments stay. The connection's drain and pong events reach every live attachment.
 */
import type { WsConn, WsSendStatus } from '../http/ws-server.js';

/** What an attachment needs of its connection. */
export type AttachmentConn = Pick<WsConn, 'id' | 'closed' | 'send' | 'bufferedAmount' | 'onDrain' | 'onClose' | 'ping' | 'onPong'>;

/**
 * Attachment ids start above any connection id (src/http/ws-route.ts counts those from 1): a hub
 * keys its clients by id, and pty-ws.v1 connections to the same session are clients of it too.
 */
let nextAttachmentId = 2 ** 40;

export class SessionAttachmentSink {
  readonly id = nextAttachmentId++;
  readonly conn: AttachmentConn;
  readonly sessionId: string;
  readonly #onDetach: (sink: SessionAttachmentSink, code: number, reason: string) => void;
  #ended = false;
  #drain: Array<() => void> = [];
  #pong: Array<() => void> = [];
  #close: Array<() => void> = [];

  /** `onDetach`: the hub closed this attachment (not called when the connection closed). */
  constructor(conn: AttachmentConn, sessionId: string, onDetach: (sink: SessionAttachmentSink, code: number, reason: string) => void) {
    this.conn = conn;
    this.sessionId = sessionId;
    this.#onDetach = onDetach;
  }

  get closed(): boolean {
    return this.#ended || this.conn.closed;
  }

  send(data: Uint8Array | string, isBinary?: boolean): WsSendStatus {
    if (this.closed) return 'closed';
    return this.conn.send(data, isBinary);
  }

  /** Detaches this session only. Idempotent. */
  close(code = 1000, reason = ''): void {
    if (this.closed) return;
    this.end();
    this.#onDetach(this, code, reason);
  }

  bufferedAmount(): number {
    return this.conn.bufferedAmount();
  }

  onDrain(cb: () => void): void {
    if (!this.closed) this.#drain.push(cb);
  }

  onClose(cb: () => void): void {
    if (this.#ended) cb();
    else this.#close.push(cb);
  }

  ping(): void {
    if (!this.closed) this.conn.ping();
  }

  onPong(cb: () => void): void {
    if (!this.closed) this.#pong.push(cb);
  }

  /** The connection drained (its owner calls this for every attachment). */
  drained(): void {
    for (const cb of this.#drain) cb();
  }

  /** The connection's peer answered a ping. */
  ponged(): void {
    for (const cb of this.#pong) cb();
  }

  /** Ends the attachment (detached, or its connection closed): onClose callbacks run once. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    const cbs = this.#close;
    this.#close = [];
    this.#drain = [];
    this.#pong = [];
    for (const cb of cbs) cb();
  }
}
