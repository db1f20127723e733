/**
 * An HTTPS listener with mutual TLS serving the shared Router: the admin listener
 * (SVC_ADMIN_ADDR; README "Operator identity, roles and permissions").
 *
 * Why node:https and not uWS: the identity of a request is the client certificate the TLS layer
 * verified, and uWS (uws-js-unofficial 20.30) verifies client certificates (SSLApp ca_file_name)
 * but gives JavaScript no way to read the verified certificate of a connection — no peer
 * certificate, SAN or fingerprint on HttpResponse or HttpRequest. Node's TLSSocket has it
 * (`getPeerCertificate`). No hot path runs here (operators, not agent output), so node:https
 * costs nothing that matters. WebSocket routes are not served on this listener.
 *
 * TLS refuses every connection without a certificate chaining to our CA, or with an expired one
 * (`requestCert`, `rejectUnauthorized`): such a request never reaches HTTP. A verified certificate
 * goes to `identify` once per connection; what it refuses is answered with that error's envelope
 * before any route is matched. Per request the listener then uses the same socket-free pipeline as
 * the uWS listener and inject(): routeRequest (header limit, Router), bodyLimits and BodyCollector
 * (src/http/body.ts), dispatch().
 */
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';
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
  type RenderedBody,
  type RenderedStream,
  type RenderedSse,
} from './dispatch.js';
import { NodeSseSink } from './node-sse.js';
import type { Route, Router } from './router.js';
import { SSE_HEADERS, SSE_HEARTBEAT, sseHeadResponse } from './sse.js';
import type { RequestPeer } from './types.js';

/** What `identify` decides about a verified client certificate. */
export type PeerDecision = { readonly ok: true; readonly peer: RequestPeer } | { readonly ok: false; readonly error: SvcError };

export interface MtlsListenerOptions extends ListenerTuning {
  host: string;
  /** 0 picks a free port (read back from `listener.port`). */
  port: number;
  router: Router;
  logger: Logger;
  /** PEM: the server certificate and its key, and the CA client certificates must chain to. */
  tls: { readonly certPem: string; readonly keyPem: string; readonly caPem: string };
  /** Maps the verified client certificate to the request's peer, or refuses it (once per connection). Must not throw. */
  identify: (cert: DetailedPeerCertificate) => PeerDecision;
  /** Counts requests and error envelopes when given (the same series as the HTTP listener). */
  metrics?: Metrics;
}

export interface MtlsListener {
  readonly port: number;
  /** Open SSE streams, for health and tests. */
  openStreams(): number;
  /** Stop; idempotent; resolves within about `closeGraceMs`. */
  close(): Promise<void>;
}

/** Start the listener. Rejects when the address cannot be bound. */
export function startMtlsListener(opts: MtlsListenerOptions): Promise<MtlsListener> {
  return new MtlsServer(opts).listen();
}

const UNMATCHED = '(unmatched)';

interface Flight {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly startedMs: number;
  route: string;
  done: boolean;
  timer: NodeJS.Timeout | undefined;
}

class MtlsServer {
  readonly #opts: MtlsListenerOptions;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #peers = new WeakMap<Socket, PeerDecision>();
  readonly #inFlight = new Set<Flight>();
  readonly #sse = new Set<NodeSseSink>();
  #closing = false;
  #closed: Promise<void> | undefined;
  #idle: (() => void) | undefined;
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(opts: MtlsListenerOptions) {
    this.#opts = opts;
    this.#server = createServer({
      cert: opts.tls.certPem,
      key: opts.tls.keyPem,
      ca: opts.tls.caPem,
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.2',
    });
    // Raw TCP sockets, handshake included: close() destroys what is left, so a client stuck in
    // the handshake cannot hold the server open.
    this.#server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
    });
    this.#server.on('tlsClientError', (err: NodeJS.ErrnoException) => {
      opts.logger.debug({ code: err.code, reason: err.message }, 'admin listener refused a TLS client');
    });
    this.#server.on('request', (req: IncomingMessage, res: ServerResponse) => this.#request(req, res));
  }

  listen(): Promise<MtlsListener> {
    const { host, port, logger } = this.#opts;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(new Error(`cannot listen for HTTPS (admin) on ${host}:${port}: ${err.message}`));
      this.#server.once('error', onError);
      this.#server.listen(port, host, () => {
        this.#server.off('error', onError);
        this.#server.on('error', (err) => logger.error({ err }, 'admin listener error'));
        const address = this.#server.address();
        const bound = typeof address === 'object' && address !== null ? address.port : port;
        logger.info({ host, port: bound }, 'admin listener started (HTTPS, mutual TLS)');
        this.#heartbeat = setInterval(() => this.#ping(), this.#opts.sseHeartbeatMs ?? 15_000).unref();
        resolve({
          port: bound,
          openStreams: () => this.#sse.size,
          close: () => (this.#closed ??= this.#shutdown(bound)),
        });
      });
    });
  }

  #peerOf(socket: TLSSocket): PeerDecision {
    let decision = this.#peers.get(socket);
    if (decision === undefined) {
      // rejectUnauthorized already refused unverified peers; this only guards the assumption.
      decision = socket.authorized
        ? this.#opts.identify(socket.getPeerCertificate(true))
        : { ok: false, error: new SvcError('agent.unauthenticated', 'no verified client certificate') };
      this.#peers.set(socket, decision);
    }
    return decision;
  }

  #request(req: IncomingMessage, res: ServerResponse): void {
    const flight: Flight = { req, res, startedMs: performance.now(), route: UNMATCHED, done: false, timer: undefined };
    this.#inFlight.add(flight);
    res.once('close', () => {
      clearTimeout(flight.timer);
      if (!flight.done) this.#finish(flight, 0, undefined);
    });
    if (this.#closing) return this.#respond(flight, renderError(new SvcError('server.not_ready', 'the server is shutting down')), true);
    const decision = this.#peerOf(req.socket as TLSSocket);
    if (!decision.ok) return this.#respond(flight, renderError(decision.error), false);
    const url = req.url ?? '';
    if (!url.startsWith('/')) {
      return this.#respond(flight, renderError(new SvcError('request.invalid', 'the request target must be a path (origin form)')), true);
    }
    const q = url.indexOf('?');
    // Null prototype: a header named __proto__ must stay a plain entry.
    const headers = Object.create(null) as Record<string, string>;
    let headerBytes = url.length;
    for (const [name, values] of Object.entries(req.headersDistinct)) {
      const value = (values ?? []).join(', ');
      headerBytes += name.length + value.length + 4;
      headers[name] = value;
    }
    const raw: RawRequest = {
      method: (req.method ?? 'GET').toUpperCase(),
      path: q < 0 ? url : url.slice(0, q),
      query: new URLSearchParams(q < 0 ? '' : url.slice(q + 1)),
      headers,
      remoteAddress: req.socket.remoteAddress ?? '',
      peer: decision.peer,
    };
    const match = routeRequest(this.#opts.router, raw, headerBytes, this.#opts);
    if (!match.ok) return this.#respond(flight, match.rendered, match.closeConnection);
    flight.route = match.route.pattern;
    if (match.route.body === 'none') return this.#run(flight, match.route, match.params, raw, null);
    this.#readBody(flight, match.route, match.params, raw);
  }

  #readBody(flight: Flight, route: Route, params: Record<string, string>, raw: RawRequest): void {
    const { maxBytes: limit, timeoutMs } = bodyLimits(route, this.#opts);
    let collector: BodyCollector;
    try {
      collector = new BodyCollector(limit, declaredBodyLength(raw.headers, limit));
    } catch (err) {
      return this.#respond(flight, renderError(err), true);
    }
    flight.timer = setTimeout(() => {
      this.#respond(flight, renderError(new SvcError('request.invalid', `the request body was not received within ${timeoutMs} ms`)), true);
    }, timeoutMs).unref();
    const { req } = flight;
    const onData = (chunk: Buffer): void => {
      if (flight.done) return;
      if (!collector.push(chunk)) {
        req.off('data', onData);
        this.#respond(flight, renderError(tooLarge(limit)), true);
      }
    };
    req.on('data', onData);
    req.once('end', () => {
      if (flight.done) return;
      clearTimeout(flight.timer);
      this.#run(flight, route, params, raw, collector.finish());
    });
  }

  #run(flight: Flight, route: Route, params: Record<string, string>, raw: RawRequest, rawBody: Uint8Array | null): void {
    dispatch(route, params, raw, rawBody, (err, pattern) => this.#logError(err, pattern, 'request handler failed'))
      .then((rendered) => {
        if (flight.done) {
          if (rendered.kind === 'stream') rendered.source.close().catch(() => undefined);
          return;
        }
        if (rendered.kind === 'sse') this.#startSse(flight, rendered, raw.method === 'HEAD');
        else if (rendered.kind === 'stream') this.#startStream(flight, rendered, raw.method === 'HEAD');
        else this.#respond(flight, rendered, this.#closing);
      })
      .catch((err: unknown) => this.#logError(err, flight.route, 'writing the response failed'));
  }

  #respond(flight: Flight, rendered: RenderedBody, closeConnection: boolean): void {
    if (flight.done) return;
    flight.done = true;
    clearTimeout(flight.timer);
    const { res } = flight;
    if (!res.destroyed) {
      for (const [k, v] of Object.entries(rendered.headers)) {
        const lower = k.toLowerCase();
        if (lower !== 'content-length' && lower !== 'content-type') res.setHeader(k, v);
      }
      const body = typeof rendered.body === 'string' ? Buffer.from(rendered.body) : rendered.body;
      res.setHeader('content-type', rendered.contentType);
      res.setHeader('content-length', body.byteLength);
      if (closeConnection || this.#closing) res.setHeader('connection', 'close');
      res.writeHead(rendered.status);
      // node sends no body on a HEAD response, whatever end() is given.
      res.end(body);
    }
    this.#finish(flight, rendered.status, rendered.errorCode);
  }

  /**
   * A streamed body: one chunk pulled at a time, the next only after `write` accepted the last
   * one or the socket drained, so memory stays flat. A source that ends early or runs long cuts
   * the connection (the announced Content-Length must not be met with other bytes).
   */
  #startStream(flight: Flight, rendered: RenderedStream, head: boolean): void {
    flight.done = true;
    clearTimeout(flight.timer);
    const { res } = flight;
    const { source, lengthBytes } = rendered;
    let ended = false;
    const end = (status: number, err?: unknown): void => {
      if (ended) return;
      ended = true;
      source.close().catch(() => undefined);
      if (err !== undefined) {
        this.#logError(err, flight.route, 'streaming the response body failed');
        res.destroy();
      }
      this.#finish(flight, status, undefined);
    };
    res.once('close', () => end(res.writableFinished ? rendered.status : 0));
    for (const [k, v] of Object.entries(rendered.headers)) {
      const lower = k.toLowerCase();
      if (lower !== 'content-length' && lower !== 'content-type') res.setHeader(k, v);
    }
    res.setHeader('content-type', rendered.contentType);
    res.setHeader('content-length', lengthBytes);
    if (this.#closing) res.setHeader('connection', 'close');
    res.writeHead(rendered.status);
    if (head || lengthBytes === 0) {
      res.end();
      return end(rendered.status);
    }
    let sent = 0;
    const pump = async (): Promise<void> => {
      while (!ended) {
        const chunk = await source.next();
        if (ended) return;
        if (chunk === null || chunk.byteLength === 0 || sent + chunk.byteLength > lengthBytes) {
          throw new Error(`the body source ended at ${sent} of ${lengthBytes} bytes announced`);
        }
        sent += chunk.byteLength;
        // write() copies nothing: the chunk must stay untouched until it drained.
        const copy = Buffer.from(chunk);
        if (sent === lengthBytes) {
          res.end(copy);
          return;
        }
        if (!res.write(copy)) {
          await new Promise<void>((resolve) => {
            const go = (): void => {
              res.off('drain', go);
              res.off('close', go);
              resolve();
            };
            res.on('drain', go);
            res.on('close', go);
          });
        }
      }
    };
    pump().catch((err: unknown) => end(0, err));
  }

  #startSse(flight: Flight, rendered: RenderedSse, head: boolean): void {
    if (head) return this.#respond(flight, sseHeadResponse(), false);
    flight.done = true;
    const { res } = flight;
    res.writeHead(200, SSE_HEADERS);
    // The first write sends the header block, so clients see the response start at once.
    res.write(': connected\n\n');
    const sink = new NodeSseSink(res, (err) => this.#logError(err, flight.route, 'sse producer callback failed'));
    this.#sse.add(sink);
    sink.onClose(() => this.#sse.delete(sink));
    this.#finish(flight, 200, undefined);
    Promise.resolve()
      .then(() => rendered.start(sink, rendered.view))
      .catch((err: unknown) => {
        this.#logError(err, flight.route, 'sse producer failed');
        sink.close();
      });
  }

  #finish(flight: Flight, status: number, errorCode: string | undefined): void {
    if (!this.#inFlight.delete(flight)) return;
    const metrics = this.#opts.metrics;
    metrics?.httpRequestsTotal.inc({ route: flight.route, status_class: statusClass(status) });
    if (errorCode !== undefined) metrics?.httpErrorsTotal.inc({ code: errorCode });
    if (this.#inFlight.size === 0) this.#idle?.();
  }

  #ping(): void {
    for (const sink of this.#sse) if (!sink.backpressured) sink.write(SSE_HEARTBEAT);
  }

  #logError(err: unknown, route: string, msg: string): void {
    this.#opts.logger.error({ err, route, listener: 'admin' }, msg);
  }

  async #shutdown(port: number): Promise<void> {
    this.#closing = true;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    clearInterval(this.#heartbeat);
    for (const sink of [...this.#sse]) sink.close();
    this.#server.closeIdleConnections();
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
    const unfinished = this.#inFlight.size;
    this.#server.closeAllConnections();
    for (const socket of this.#sockets) socket.destroy();
    await closed;
    this.#opts.logger.info({ port, unfinished }, 'admin listener stopped');
  }
}
