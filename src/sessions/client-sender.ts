/**
 * One session client's bounded send queue (DESIGN: each subscriber has its own bounded queue, so
 * a slow viewer never stalls the terminal). The same policy as SSE (src/streaming/
 * sse-subscriber.ts), on a WebSocket: frames are encoded once per session and handed to every
 * client's socket, whose own buffer (uWS) is the queue. `send` never blocks and never waits: when
 * the bytes queued for this client plus the new frame would pass `maxQueuedBytes` (default
 * 1 MiB), the client is cut off — one fatal error frame `slow_consumer`, close 4413 — and the
 * producer and the other clients carry on. The client rejoins with replay_from = its last seq + 1.
 */
import { encodeError } from './pty-ws-frames.js';
import { CloseCode } from './pty-ws-protocol.js';

/** Default bound of bytes queued for one client: 1 MiB. */
export const DEFAULT_CLIENT_QUEUE_BYTES = 1024 * 1024;

/** What a session client writes to: WsConn (src/http/ws-route.ts) satisfies it. */
export interface FrameSink {
  readonly id: number;
  readonly closed: boolean;
  send(data: Uint8Array | string, isBinary?: boolean): 'sent' | 'backpressure' | 'dropped' | 'closed';
  close(code?: number, reason?: string): void;
  /** Bytes queued in the transport and not yet taken by the kernel. */
  bufferedAmount(): number;
}

export interface ClientSenderOptions {
  /** Default {@link DEFAULT_CLIENT_QUEUE_BYTES}. */
  maxQueuedBytes?: number;
  /** Called once when the client is cut off for falling behind (count it). */
  onSlow?: (sender: ClientSender) => void;
}

export class ClientSender {
  readonly sink: FrameSink;
  readonly maxQueuedBytes: number;
  readonly #onSlow: ClientSenderOptions['onSlow'];
  #cutOff = false;

  constructor(sink: FrameSink, opts: ClientSenderOptions = {}) {
    const max = opts.maxQueuedBytes ?? DEFAULT_CLIENT_QUEUE_BYTES;
    if (!Number.isSafeInteger(max) || max <= 0) throw new RangeError(`maxQueuedBytes must be a positive integer, got ${max}`);
    this.sink = sink;
    this.maxQueuedBytes = max;
    this.#onSlow = opts.onSlow;
  }

  /** True once the sink closed or this client was cut off. */
  get closed(): boolean {
    return this.#cutOff || this.sink.closed;
  }

  get cutOff(): boolean {
    return this.#cutOff;
  }

  /** Bytes queued for this client (its lag). */
  lagBytes(): number {
    return this.sink.closed ? 0 : this.sink.bufferedAmount();
  }

  /**
   * Queues one frame unless that would pass the bound (then the client is cut off). Returns false
   * when the frame was not queued.
   */
  send(frame: Uint8Array | string, isBinary = false): boolean {
    if (this.closed) return false;
    const size = typeof frame === 'string' ? Buffer.byteLength(frame) : frame.byteLength;
    if (this.sink.bufferedAmount() + size > this.maxQueuedBytes) {
      this.#cut();
      return false;
    }
    const r = this.sink.send(frame, isBinary);
    if (r === 'dropped') this.#cut();
    return r === 'sent' || r === 'backpressure';
  }

  /** Sends a control frame past the bound (tiny frames the client must see: errors, closed). */
  sendControl(frame: string): void {
    if (!this.sink.closed) this.sink.send(frame, false);
  }

  #cut(): void {
    if (this.#cutOff) return;
    this.#cutOff = true;
    this.sendControl(encodeError('slow_consumer', `more than ${this.maxQueuedBytes} bytes were queued for this client; rejoin with replay_from`, true));
    this.sink.close(CloseCode.slowConsumer, 'slow consumer');
    this.#onSlow?.(this);
  }
}
