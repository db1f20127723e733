/**
 * The HTTP listener on uWebSockets.js: one `any('/*')` handler feeding the Router.
 *
 * Per request: copy the request synchronously (uWS's is stack-allocated), always set onAborted,
 * read the body under its limit and deadline, run the socket-free dispatcher, write the result
 * corked. SSE streams get their headers, a heartbeat comment and backpressure-driven writes.
 * close() stops listening, ends SSE and WS streams, lets in-flight requests finish within a
 * grace period, then force-closes what is left; requests arriving meanwhile get 503.
 */
import { performance } from 'node:perf_hooks';
import uWS from '@trufflesuite/uws-js-unofficial';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from '@trufflesuite/uws-js-unofficial';
import type { Logger } from 'pino';
import { SvcError } from '../core/errors.js';
import { statusClass, type Metrics } from '../observability/metrics.js';
import { BodyCollector, declaredBodyLength, tooLarge } from './body.js';
import {
  bodyLimits,
  dispatch,
  renderError,
  routeRequest,
  type ListenerTuning,
  type RawRequest,
  type Rendered,
  type RenderedBody,
  type RenderedSse,
  type RenderedStream,
} from './dispatch.js';
import type { Route, Router } from './router.js';
import { SSE_HEADERS, SSE_HEARTBEAT, sseHeadResponse, UwsSseSink } from './sse.js';
import type { RequestInfo } from './types.js';
import { assertNativeUws, closeApp, copyRequest, uwsRuntimeInfo, writeRendered } from './uws-io.js';
import { attachWsRoute, type WsConn, type WsRouteOptions } from './ws-route.js';
import { UwsStreamWriter } from './uws-stream.js';

export { assertNativeUws, uwsRuntimeInfo } from './uws-io.js';

export interface HttpListenerOptions extends ListenerTuning {
  host: string;
  /** 0 picks a free port (read back from `listener.port`). */
  port: number;
  router: Router;
  logger: Logger;
  /** Counts requests, error envelopes and logged errors when given. */
  metrics?: Metrics;
  /** Called once per finished request (SSE: when the stream starts). Must not throw. */
  onRequest?: (info: RequestInfo) => void;
  /** WebSocket routes on this App (e.g. pty-ws.v1); they take precedence over HTTP routes for upgrades. */
  wsRoutes?: readonly WsRouteOptions[];
}

export interface HttpListener {
  readonly port: number;
  /** Publish to subscribers of `topic` on this listener's WS routes. Text unless `isBinary`. */
  publish(topic: string, bytes: Uint8Array | string, isBinary?: boolean): void;
  /** Open SSE streams and WS connections, for health and tests. */
  openStreams(): { sse: number; ws: number };
  /** Stop; idempotent; resolves within about `closeGraceMs`. */
  close(): Promise<void>;
}

/** Start the HTTP listener. Rejects when the address cannot be bound or uWS is not native. */
export async function startHttpListener(opts: HttpListenerOptions): Promise<HttpListener> {
  assertNativeUws();
  return await new HttpServer(opts).listen();
}

const UNMATCHED = '(unmatched)';
/** Longest an SSE response head waits for its stream's first frame (ms); usually it waits for none. */
const kSseHeadHoldMs = 20;

interface Flight {
  readonly res: HttpResponse;
  readonly raw: RawRequest;
  readonly startedMs: number;
  route: string;
  done: boolean;
  aborted: boolean;
  timer: NodeJS.Timeout | undefined;
  sse: UwsSseSink | undefined;
  stream: UwsStreamWriter | undefined;
}

class HttpServer {
  readonly #opts: HttpListenerOptions;
  readonly #app: TemplatedApp = uWS.App();
  readonly #inFlight = new Set<Flight>();
  readonly #sse = new Set<UwsSseSink>();
  readonly #ws = new Set<WsConn>();
  #closing = false;
  #closed: Promise<void> | undefined;
  #idle: (() => void) | undefined;
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(opts: HttpListenerOptions) {
    this.#opts = opts;
    for (const route of opts.wsRoutes ?? []) {
      attachWsRoute(this.#app, route, { logger: opts.logger, conns: this.#ws, closing: () => this.#closing });
    }
    this.#app.any('/*', (res, req) => this.#request(res, req));
  }

  listen(): Promise<HttpListener> {
    const { host, port, logger } = this.#opts;
    return new Promise((resolve, reject) => {
      this.#app.listen(host, port, (listenSocket) => {
        if (listenSocket === false) {
          reject(new Error(`cannot listen for HTTP on ${host}:${port}`));
          return;
        }
        const bound = uWS.us_socket_local_port(listenSocket);
        logger.info({ host, port: bound, uws: uwsRuntimeInfo() }, 'http listener started');
        this.#heartbeat = setInterval(() => this.#ping(), this.#opts.sseHeartbeatMs ?? 15_000).unref();
        resolve({
          port: bound,
          publish: (topic, bytes, isBinary = false) => {
            if (!this.#closing) this.#app.publish(topic, bytes, isBinary);
          },
          openStreams: () => ({ sse: this.#sse.size, ws: this.#ws.size }),
          close: () => (this.#closed ??= this.#shutdown(listenSocket, bound)),
        });
      });
    });
  }

  #request(res: HttpResponse, req: HttpRequest): void {
    const raw = copyRequest(res, req);
    const flight: Flight = {
      res,
      raw,
      startedMs: performance.now(),
      route: UNMATCHED,
      done: false,
      aborted: false,
      timer: undefined,
      sse: undefined,
      stream: undefined,
    };
    this.#inFlight.add(flight);
    res.onAborted(() => this.#aborted(flight));
    if (this.#closing) return this.#respond(flight, renderError(new SvcError('server.not_ready', 'the server is shutting down')), true);
    const match = routeRequest(this.#opts.router, raw, raw.headerBytes, this.#opts);
    if (!match.ok) return this.#respond(flight, match.rendered, match.closeConnection);
    flight.route = match.route.pattern;
    if (match.route.body === 'none') return this.#run(flight, match.route, match.params, null);
    this.#readBody(flight, match.route, match.params);
  }

  #readBody(flight: Flight, route: Route, params: Record<string, string>): void {
    const { maxBytes: limit, timeoutMs } = bodyLimits(route, this.#opts);
    let collector: BodyCollector;
    try {
      collector = new BodyCollector(limit, declaredBodyLength(flight.raw.headers, limit));
    } catch (err) {
      return this.#respond(flight, renderError(err), true);
    }
    flight.timer = setTimeout(() => {
      this.#respond(flight, renderError(new SvcError('request.invalid', `the request body was not received within ${timeoutMs} ms`)), true);
    }, timeoutMs).unref();
    flight.res.onData((chunk, isLast) => {
      if (flight.done || flight.aborted) return;
      if (!collector.push(chunk)) return this.#respond(flight, renderError(tooLarge(limit)), true);
      if (isLast) {
        clearTimeout(flight.timer);
        this.#run(flight, route, params, collector.finish());
      }
    });
  }

  #run(flight: Flight, route: Route, params: Record<string, string>, rawBody: Uint8Array | null): void {
    dispatch(route, params, flight.raw, rawBody, (err, pattern) => this.#logError(err, pattern, 'request handler failed'))
      .then((rendered: Rendered) => {
        if (flight.done || flight.aborted) {
          if (rendered.kind === 'stream') rendered.source.close().catch(() => undefined);
          return;
        }
        if (rendered.kind === 'sse') this.#startSse(flight, rendered);
        else if (rendered.kind === 'stream') this.#startStream(flight, rendered);
        else this.#respond(flight, rendered, this.#closing);
      })
      .catch((err: unknown) => this.#logError(err, flight.route, 'writing the response failed'));
  }

  #respond(flight: Flight, rendered: RenderedBody, closeConnection: boolean): void {
    if (flight.done || flight.aborted) return;
    flight.done = true;
    clearTimeout(flight.timer);
    writeRendered(flight.res, rendered, { head: flight.raw.method === 'HEAD', closeConnection: closeConnection || this.#closing });
    this.#finish(flight, rendered.status, rendered.errorCode);
  }

  #startSse(flight: Flight, rendered: RenderedSse): void {
    if (flight.raw.method === 'HEAD') return this.#respond(flight, sseHeadResponse(), false);
    flight.done = true;
    const res = flight.res;
    // The head goes out with the first frame (a replay page: one send), when the producer has
    // started, or after kSseHeadHoldMs, whichever comes first (sse.ts).
    const sink = new UwsSseSink(
      res,
      (err) => this.#logError(err, flight.route, 'sse producer callback failed'),
      () => {
        res.writeStatus('200 OK');
        for (const [k, v] of Object.entries(SSE_HEADERS)) res.writeHeader(k, v);
        // The first write sends the header block, so clients see the response start.
        res.write(': connected\n\n');
      },
    );
    const hold = setTimeout(() => sink.flushHead(), kSseHeadHoldMs);
    flight.sse = sink;
    this.#sse.add(sink);
    sink.onClose(() => {
      clearTimeout(hold);
      this.#sse.delete(sink);
    });
    this.#finish(flight, 200, undefined);
    Promise.resolve()
      .then(() => rendered.start(sink, rendered.view))
      .catch((err: unknown) => {
        this.#logError(err, flight.route, 'sse producer failed');
        sink.close();
      })
      .finally(() => {
        clearTimeout(hold);
        sink.flushHead();
      });
  }

  /** A streamed body: the flight stays in flight (close() waits for it) until it is sent or cut. */
  #startStream(flight: Flight, rendered: RenderedStream): void {
    flight.done = true;
    const writer = new UwsStreamWriter(flight.res, rendered, {
      closeConnection: this.#closing,
      onEnd: (outcome, err) => {
        if (outcome === 'failed') this.#logError(err, flight.route, 'streaming the response body failed');
        this.#finish(flight, outcome === 'sent' ? rendered.status : 0, undefined);
      },
    });
    flight.stream = writer;
    writer.start(flight.raw.method === 'HEAD');
  }

  #aborted(flight: Flight): void {
    flight.aborted = true;
    clearTimeout(flight.timer);
    if (flight.stream !== undefined) flight.stream.abort();
    else if (flight.sse !== undefined) flight.sse.aborted();
    else if (!flight.done) this.#finish(flight, 0, undefined);
  }

  #finish(flight: Flight, status: number, errorCode: string | undefined): void {
    this.#inFlight.delete(flight);
    const metrics = this.#opts.metrics;
    metrics?.httpRequestsTotal.inc({ route: flight.route, status_class: statusClass(status) });
    if (errorCode !== undefined) metrics?.httpErrorsTotal.inc({ code: errorCode });
    if (this.#opts.onRequest !== undefined) {
      const info: RequestInfo = {
        method: flight.raw.method,
        route: flight.route,
        status,
        ...(errorCode !== undefined && { errorCode }),
        durationMs: performance.now() - flight.startedMs,
        aborted: status === 0,
      };
      try {
        this.#opts.onRequest(info);
      } catch (err) {
        this.#logError(err, flight.route, 'onRequest hook failed');
      }
    }
    if (this.#inFlight.size === 0) this.#idle?.();
  }

  #ping(): void {
    for (const sink of this.#sse) if (!sink.backpressured) sink.write(SSE_HEARTBEAT);
  }

  #logError(err: unknown, route: string, msg: string): void {
    this.#opts.logger.error({ err, route }, msg);
  }

  async #shutdown(listenSocket: us_listen_socket, port: number): Promise<void> {
    this.#closing = true;
    uWS.us_listen_socket_close(listenSocket);
    clearInterval(this.#heartbeat);
    for (const sink of [...this.#sse]) sink.close(true);
    for (const conn of [...this.#ws]) conn.close(1001, 'server shutting down');
    this.#ws.clear();
    if (this.#inFlight.size > 0) {
      // Ref'd on purpose: close() must settle even when nothing else keeps the loop alive.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.#opts.closeGraceMs ?? 2000);
        this.#idle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    // Force-close what is left: stuck requests (their onAborted runs) and idle keep-alive sockets.
    closeApp(this.#app);
    this.#opts.logger.info({ port, unfinished: this.#inFlight.size }, 'http listener stopped');
  }
}
