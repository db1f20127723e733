/**
 * The dashboard WebSocket listener (spec 4.18; port 8121 by default): its own uWS App on its own
 * host:port. Clients connect to any path. Plain HTTP requests get a 404 envelope.
 *
 * What a connection says (subscribe, join_session, ...) is handled by the `handlers` passed in:
 * the server passes the dashboard hub's (src/streaming/ws-hub.ts). Without them,
 * `defaultWsHandlers` greets with `server_hello` and answers every message with an error frame.
 */
import uWS from '@trufflesuite/uws-js-unofficial';
import type { Logger } from 'pino';
import { SvcError } from '../core/errors.js';
import { renderError } from './dispatch.js';
import { assertNativeUws, closeApp, writeRendered } from './uws-io.js';
import { attachWsRoute, defaultWsHandlers, type WsConn, type WsHandlers } from './ws-route.js';

export { defaultWsHandlers, type WsConn, type WsHandlers, type WsRouteOptions, type WsSendStatus } from './ws-route.js';

export interface WsListenerOptions {
  host: string;
  /** 0 picks a free port (read back from `listener.port`). */
  port: number;
  logger: Logger;
  /** Per-connection send queue limit; a connection over it is closed. Default 4 MiB. */
  maxBackpressureBytes?: number;
  /** Idle close after this many seconds without traffic (uWS sends pings). Default 120. */
  idleTimeoutSeconds?: number;
  /** Largest accepted incoming message. Default 64 KiB. */
  maxPayloadBytes?: number;
  /** Default: {@link defaultWsHandlers}. */
  handlers?: WsHandlers;
}

export interface WsListener {
  readonly port: number;
  /** Connections currently open. */
  connectionCount(): number;
  /** Send one frame to every subscriber of `topic` (encoded once, fanned out natively). Text unless `isBinary`. */
  publish(topic: string, bytes: Uint8Array | string, isBinary?: boolean): void;
  /** Number of connections subscribed to `topic`. */
  subscriberCount(topic: string): number;
  /** Stop listening and close every connection with 1001; idempotent. */
  close(): Promise<void>;
}

/** Start the WS listener. Rejects when the address cannot be bound or uWS is not native. */
export async function startWsListener(opts: WsListenerOptions): Promise<WsListener> {
  assertNativeUws();
  const app = uWS.App();
  const conns = new Set<WsConn>();
  let closing = false;
  attachWsRoute(
    app,
    {
      path: '/*',
      handlers: opts.handlers ?? defaultWsHandlers,
      ...(opts.maxBackpressureBytes !== undefined && { maxBackpressureBytes: opts.maxBackpressureBytes }),
      ...(opts.idleTimeoutSeconds !== undefined && { idleTimeoutSeconds: opts.idleTimeoutSeconds }),
      ...(opts.maxPayloadBytes !== undefined && { maxPayloadBytes: opts.maxPayloadBytes }),
    },
    { logger: opts.logger, conns, closing: () => closing },
  );
  // Non-upgrade requests fall through the ws route to here.
  app.any('/*', (res) => {
    writeRendered(res, renderError(new SvcError('route.not_found', 'this is the WebSocket listener: connect with a WebSocket upgrade')), {
      head: false,
      closeConnection: true,
    });
  });

  return await new Promise<WsListener>((resolve, reject) => {
    app.listen(opts.host, opts.port, (listenSocket) => {
      if (listenSocket === false) {
        reject(new Error(`cannot listen for WebSocket on ${opts.host}:${opts.port}`));
        return;
      }
      const port = uWS.us_socket_local_port(listenSocket);
      let closed: Promise<void> | undefined;
      opts.logger.info({ host: opts.host, port }, 'websocket listener started');
      resolve({
        port,
        connectionCount: () => conns.size,
        publish(topic, bytes, isBinary = false) {
          if (!closing) app.publish(topic, bytes, isBinary);
        },
        subscriberCount: (topic) => app.numSubscribers(topic),
        close() {
          closed ??= (async () => {
            closing = true;
            uWS.us_listen_socket_close(listenSocket);
            for (const conn of [...conns]) conn.close(1001, 'server shutting down');
            conns.clear();
            // Let the close frames go out before the sockets are torn down. Ref'd on purpose:
            // close() must settle even when nothing else keeps the event loop alive.
            await new Promise((r) => setTimeout(r, 50));
            closeApp(app);
            opts.logger.info({ port }, 'websocket listener stopped');
          })();
          return closed;
        },
      });
    });
  });
}
