/**
 * A WebSocket route on a uWS App: used by the dashboard listener (ws-server.ts, spec 4.18) and
 * for WS routes on the HTTP App (`wsRoutes` of startHttpListener; pty-ws.v1 later).
 *
 * Handlers see a small {@link WsConn}, never the uWS socket (which is invalid after close).
 * Overflow is explicit: a connection whose backpressure passes `maxBackpressureBytes` is closed
 * (uWS closeOnBackpressureLimit) instead of silently skipping published frames.
 */
import uWS from '@trufflesuite/uws-js-unofficial';
import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocket } from '@trufflesuite/uws-js-unofficial';
import type { Logger } from 'pino';
import { SvcError } from '../core/errors.js';
import { renderError } from './dispatch.js';
import { copyRequest, writeRendered } from './uws-io.js';
import type { LiveSink } from './live-subscriber.js';
import type { RequestView } from './types.js';

/** Result of `send`: queued fully, queued under backpressure, dropped (over the limit), or closed. */
export type WsSendStatus = 'sent' | 'backpressure' | 'dropped' | 'closed';

export interface WsConn {
  /** Process-unique connection number. */
  readonly id: number;
  /** The upgrade request (path, query, headers, params); body is always empty. */
  readonly request: RequestView;
  /** The subprotocol selected at upgrade ('' when none). */
  readonly protocol: string;
  readonly closed: boolean;
  /**
   * Text frame unless `isBinary`. Sends are batched (see kBatchFlushBytes): the bytes are read
   * when the batch goes, at the end of the synchronous run at the latest, so leave them unchanged
   * until then. 'sent' means queued in order; a batch that meets backpressure makes later sends
   * answer 'backpressure' until uWS drains the connection.
   */
  send(data: Uint8Array | string, isBinary?: boolean): WsSendStatus;
  subscribe(topic: string): void;
  unsubscribe(topic: string): void;
  /** Close with a code (default 1000) and a short reason; idempotent. */
  close(code?: number, reason?: string): void;
  /** Bytes queued in uWS for this connection. */
  bufferedAmount(): number;
  /** Called each time uWS drained this connection's backpressure. */
  onDrain(cb: () => void): void;
  /** Called once when the connection closes (either side). */
  onClose(cb: () => void): void;
  /** Sends a WebSocket Ping control frame (the peer's Pong arrives through {@link onPong}). */
  ping(): void;
  /** Called for every WebSocket Pong from the peer. */
  onPong(cb: () => void): void;
}

export interface WsHandlers {
  open?(conn: WsConn): void;
  /** `data` is only valid during the call (uWS neuters it afterwards): copy what you keep. */
  message?(conn: WsConn, data: ArrayBuffer, isBinary: boolean): void;
  close?(conn: WsConn, code: number): void;
  /** Backpressure drained below the limit. */
  drain?(conn: WsConn): void;
}

export interface WsRouteOptions {
  /** uWS pattern, e.g. `/*` or `/api/v1/pty/:id` (`:params` land in `conn.request.params`). */
  path: string;
  handlers: WsHandlers;
  /** Per-connection send queue limit; over it the connection is closed. Default 4 MiB. */
  maxBackpressureBytes?: number;
  /** Close after this many seconds without traffic (uWS pings in between; 0 disables). Default 120. */
  idleTimeoutSeconds?: number;
  /** Largest accepted incoming message. Default 64 KiB. */
  maxPayloadBytes?: number;
  /**
   * Accepted subprotocols, most preferred first: the first of these the client offers is chosen;
   * when set, a client offering none of them is refused with 400.
   */
  protocols?: readonly string[];
  /** Runs before the upgrade; throw an SvcError to refuse with its envelope. */
  authorize?: (req: RequestView) => void | Promise<void>;
}

/** Live state shared between a route and the listener that owns it. */
export interface WsRouteContext {
  readonly logger: Logger;
  readonly conns: Set<WsConn>;
  /** True once the owning listener is stopping: upgrades are refused with 503. */
  closing(): boolean;
}

interface UserData {
  conn: WsConnImpl;
}

let nextConnId = 1;

/**
 * Sends to a connection are batched: held until the end of the synchronous run that made them
 * (a microtask) and handed to uWS corked, so a run that sends many frames to many connections
 * (a PTY flood to a session's observers: one frame per output chunk per client) costs one write
 * per connection, not one per frame. A batch reaching this many bytes is handed over at once,
 * so what waits here stays small and the send status stays current.
 */
const kBatchFlushBytes = 64 * 1024;

class WsConnImpl implements WsConn {
  readonly id = nextConnId++;
  readonly request: RequestView;
  readonly protocol: string;
  #ws: WebSocket<UserData> | null = null;
  #closed = false;
  readonly #drainCbs: Array<() => void> = [];
  readonly #pongCbs: Array<() => void> = [];
  #closeCbs: Array<() => void> = [];
  /** Sends held until the end of the synchronous run (see {@link kBatchFlushBytes}); false once subscribed to a topic. */
  #batching = true;
  #pending: Array<Uint8Array | string> = [];
  #pendingBinary: boolean[] = [];
  #pendingBytes = 0;
  #flushQueued = false;
  /** A batch met backpressure; cleared by uWS's drain event. */
  #blocked = false;

  constructor(request: RequestView, protocol: string) {
    this.request = request;
    this.protocol = protocol;
  }
  attach(ws: WebSocket<UserData>): void {
    this.#ws = ws;
  }
  detach(): void {
    this.#closed = true;
    this.#ws = null;
    this.#pending = [];
    this.#pendingBinary = [];
    this.#pendingBytes = 0;
    for (const cb of this.#closeCbs.splice(0)) cb();
  }
  drained(): void {
    this.#blocked = false;
    for (const cb of this.#drainCbs) cb();
  }
  onDrain(cb: () => void): void {
    this.#drainCbs.push(cb);
  }
  ponged(): void {
    for (const cb of this.#pongCbs) cb();
  }
  onPong(cb: () => void): void {
    this.#pongCbs.push(cb);
  }
  ping(): void {
    this.#flush();
    this.#ws?.ping();
  }
  onClose(cb: () => void): void {
    if (this.#closed) cb();
    else this.#closeCbs.push(cb);
  }
  get closed(): boolean {
    return this.#closed;
  }
  send(data: Uint8Array | string, isBinary = false): WsSendStatus {
    const ws = this.#ws;
    if (ws === null) return 'closed';
    if (!this.#batching) {
      const r = ws.send(data, isBinary);
      return r === 1 ? 'sent' : r === 0 ? 'backpressure' : 'dropped';
    }
    this.#pending.push(data);
    this.#pendingBinary.push(isBinary);
    this.#pendingBytes += typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
    if (this.#pendingBytes >= kBatchFlushBytes) this.#flush();
    else if (!this.#flushQueued) {
      this.#flushQueued = true;
      queueMicrotask(this.#flushQueuedBatch);
    }
    return this.#ws === null ? 'dropped' : this.#blocked ? 'backpressure' : 'sent';
  }
  readonly #flushQueuedBatch = (): void => {
    this.#flushQueued = false;
    this.#flush();
  };
  /** Hands the batch to uWS corked: one write for all of it. */
  #flush(): void {
    const ws = this.#ws;
    const frames = this.#pending;
    const binary = this.#pendingBinary;
    if (frames.length === 0) return;
    this.#pending = [];
    this.#pendingBinary = [];
    this.#pendingBytes = 0;
    if (ws === null) return;
    ws.cork(() => {
      for (let i = 0; i < frames.length; i++) {
        // 0: queued in uWS under backpressure (its drain event unblocks); 2: over the limit, closing.
        if (ws.send(frames[i] as Uint8Array | string, binary[i]) !== 1) this.#blocked = true;
      }
    });
  }
  subscribe(topic: string): void {
    // uWS orders a send after what was published to the connection before it; a batch held back
    // here would be overtaken, so a subscribed connection sends at once from now on.
    this.#flush();
    this.#batching = false;
    this.#ws?.subscribe(topic);
  }
  unsubscribe(topic: string): void {
    this.#ws?.unsubscribe(topic);
  }
  close(code = 1000, reason = ''): void {
    const ws = this.#ws;
    if (ws === null) return;
    this.#flush();
    this.detach();
    ws.end(code, reason.slice(0, 120));
  }
  bufferedAmount(): number {
    return (this.#ws?.getBufferedAmount() ?? 0) + this.#pendingBytes;
  }
}

/**
 * A connection as a LiveSink (./live-subscriber.ts): strings go as text frames, bytes as binary;
 * a slow consumer is closed with `slowClose`. uWS's own buffer is the sink's buffer; its drain
 * event is the sink's onWritable.
 */
export function wsLiveSink(
  conn: Pick<WsConn, 'send' | 'close' | 'closed' | 'bufferedAmount' | 'onDrain' | 'onClose'>,
  slowClose: { code: number; reason: string },
): LiveSink {
  return {
    write: (frame) => conn.send(frame, typeof frame !== 'string') === 'sent',
    onWritable: (cb) => conn.onDrain(cb),
    onClose: (cb) => conn.onClose(cb),
    close: () => conn.close(),
    closeSlow: () => conn.close(slowClose.code, slowClose.reason),
    get closed() {
      return conn.closed;
    },
    bufferedBytes: () => conn.bufferedAmount(),
  };
}

/** Attach a WS route to an App. Connections are tracked in `ctx.conns` for shutdown. */
export function attachWsRoute(app: TemplatedApp, opts: WsRouteOptions, ctx: WsRouteContext): void {
  const paramNames = opts.path
    .split('/')
    .filter((s) => s.startsWith(':'))
    .map((s) => s.slice(1));
  const safe = (what: string, fn: () => void): void => {
    try {
      fn();
    } catch (err) {
      ctx.logger.error({ err, route: opts.path }, `ws ${what} handler failed`);
    }
  };
  app.ws<UserData>(opts.path, {
    compression: uWS.DISABLED,
    maxPayloadLength: opts.maxPayloadBytes ?? 64 * 1024,
    maxBackpressure: opts.maxBackpressureBytes ?? 4 * 1024 * 1024,
    closeOnBackpressureLimit: 1,
    idleTimeout: opts.idleTimeoutSeconds ?? 120,
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => upgrade(res, req, context, opts, paramNames, ctx),
    open: (ws) => {
      const conn = ws.getUserData().conn;
      conn.attach(ws);
      ctx.conns.add(conn);
      if (opts.handlers.open) safe('open', () => opts.handlers.open?.(conn));
    },
    message: (ws, data, isBinary) => {
      const conn = ws.getUserData().conn;
      if (opts.handlers.message) safe('message', () => opts.handlers.message?.(conn, data, isBinary));
    },
    pong: (ws) => {
      const conn = ws.getUserData().conn;
      safe('pong', () => conn.ponged());
    },
    drain: (ws) => {
      const conn = ws.getUserData().conn;
      safe('drain', () => conn.drained());
      if (opts.handlers.drain) safe('drain', () => opts.handlers.drain?.(conn));
    },
    close: (ws, code) => {
      const conn = ws.getUserData().conn;
      conn.detach();
      ctx.conns.delete(conn);
      if (opts.handlers.close) safe('close', () => opts.handlers.close?.(conn, code));
    },
  });
}

function upgrade(
  res: HttpResponse,
  req: HttpRequest,
  context: us_socket_context_t,
  opts: WsRouteOptions,
  paramNames: readonly string[],
  ctx: WsRouteContext,
): void {
  // Everything from `req` is copied now: it is stack-allocated and gone after this callback.
  const raw = copyRequest(res, req);
  const key = raw.headers['sec-websocket-key'] ?? '';
  const extensions = raw.headers['sec-websocket-extensions'] ?? '';
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  const refuse = (err: unknown): void => {
    if (!aborted) writeRendered(res, renderError(err), { head: false, closeConnection: true });
  };
  try {
    if (ctx.closing()) throw new SvcError('server.not_ready', 'the server is shutting down');
    const params: Record<string, string> = Object.create(null) as Record<string, string>;
    paramNames.forEach((name, i) => {
      try {
        params[name] = decodeURIComponent(req.getParameter(i));
      } catch {
        throw new SvcError('request.invalid', `invalid percent-encoding in path parameter ${name}`);
      }
    });
    const offered = (raw.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    let protocol = '';
    if (opts.protocols !== undefined) {
      protocol = opts.protocols.find((p) => offered.includes(p)) ?? '';
      if (protocol === '') throw new SvcError('request.invalid', `supported WebSocket subprotocols: ${opts.protocols.join(', ')}`);
    }
    const view: RequestView = { ...raw, params, body: undefined, rawBody: null };
    const conn = new WsConnImpl(view, protocol);
    const finish = (): void => {
      if (aborted) return;
      res.cork(() => {
        res.upgrade<UserData>({ conn }, key, protocol, extensions, context);
      });
    };
    if (opts.authorize === undefined) return finish();
    Promise.resolve()
      .then(() => opts.authorize?.(view))
      .then(finish, (err: unknown) => {
        if (!(err instanceof SvcError)) ctx.logger.error({ err, route: opts.path }, 'ws authorize failed');
        refuse(err);
      })
      .catch((err: unknown) => ctx.logger.error({ err, route: opts.path }, 'ws upgrade failed'));
  } catch (err) {
    refuse(err);
  }
}

/** Default dashboard behaviour until the subscription protocol lands: hello on open, errors otherwise. */
export const defaultWsHandlers: WsHandlers = {
  open(conn) {
    conn.send(JSON.stringify({ type: 'server_hello', conn_id: conn.id, timestamp: Date.now() }));
  },
  message(conn, data, isBinary) {
    let message = 'binary messages are not accepted';
    if (!isBinary) {
      let type: unknown;
      try {
        type = (JSON.parse(Buffer.from(data).toString('utf8')) as { type?: unknown } | null)?.type;
      } catch {
        type = undefined;
      }
      message =
        typeof type === 'string' ? `unknown message type: ${type.slice(0, 100)}` : 'expected a JSON object with a string type field';
    }
    conn.send(JSON.stringify({ type: 'error', message }));
  },
};
