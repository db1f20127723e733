/**
 * The ceilings the streaming scenarios are judged against, in the bench process:
 *
 * - RawFanout: a bare uWS App. GET /sse keeps each response open as an SSE stream; every WS
 *   connection is subscribed to one topic. `send(sse, ws)` writes the SSE frame to every stream
 *   (corked, like the server's SseSink) and publishes the WS message: no actors, no topics, no
 *   queues, no encoding.
 * - RawSse: a bare uWS App whose GET /sse answers as the server's SSE route does (same headers,
 *   `: connected` comment) and then writes one given buffer, corked: the replay's ceiling.
 * - RawGrpc: a bare grpc-js server with mTLS and identity serializers on the Connect path that
 *   only counts the bytes of the messages it receives.
 * - FrameTemplate: the fanout's own frames for one chunk (built by its encoder, chunk-events.ts),
 *   with the seq digits rewritten per chunk, so the raw loop sends the same bytes as the server.
 */
import * as grpc from '@grpc/grpc-js';
import uWS from '@trufflesuite/uws-js-unofficial';
import type { HttpResponse, TemplatedApp, us_listen_socket } from '@trufflesuite/uws-js-unofficial';
import { AgentServiceMethods } from '../../proto/index.js';
import { closeApp } from '../../src/http/uws-io.js';
import { encodeChunkSse, encodeChunkWs } from '../../actors/protocol/chunk-events.js';
import { SSE_HEADERS } from '../../src/http/sse.js';
import type { CaMaterial } from '../../src/identity/ca.js';

export class RawFanout {
  readonly port: number;
  readonly #app: TemplatedApp;
  readonly #listen: us_listen_socket;
  readonly sse = new Set<HttpResponse>();

  private constructor(app: TemplatedApp, listen: us_listen_socket) {
    this.#app = app;
    this.#listen = listen;
    this.port = uWS.us_socket_local_port(listen);
  }

  static start(maxBackpressureBytes: number): Promise<RawFanout> {
    const app = uWS.App();
    let raw: RawFanout | undefined;
    app.get('/sse', (res) => {
      res.onAborted(() => raw?.sse.delete(res));
      res.cork(() => {
        res.writeStatus('200 OK').writeHeader('content-type', 'text/event-stream').writeHeader('cache-control', 'no-cache');
        res.write(': connected\n\n');
      });
      raw?.sse.add(res);
    });
    app.ws('/*', {
      compression: uWS.DISABLED,
      maxBackpressure: maxBackpressureBytes,
      closeOnBackpressureLimit: 1,
      open: (ws) => {
        ws.subscribe('raw');
      },
    });
    return new Promise((resolve, reject) => {
      app.listen('127.0.0.1', 0, (listen) => {
        if (listen === false) return reject(new Error('raw fanout: cannot listen'));
        raw = new RawFanout(app, listen);
        resolve(raw);
      });
    });
  }

  send(sse: Uint8Array, ws: Uint8Array): void {
    for (const res of this.sse) {
      res.cork(() => {
        res.write(sse);
      });
    }
    this.#app.publish('raw', ws, false);
  }

  close(): void {
    uWS.us_listen_socket_close(this.#listen);
    closeApp(this.#app);
  }
}

/** GET /sse: the SSE response head, then `body` in one corked write (uWS keeps what the socket does not take). */
export class RawSse {
  readonly port: number;
  body: Uint8Array = new Uint8Array(0);
  readonly #app: TemplatedApp;
  readonly #listen: us_listen_socket;

  private constructor(app: TemplatedApp, listen: us_listen_socket) {
    this.#app = app;
    this.#listen = listen;
    this.port = uWS.us_socket_local_port(listen);
  }

  static start(): Promise<RawSse> {
    const app = uWS.App();
    const ref: { raw?: RawSse } = {};
    app.get('/sse', (res) => {
      res.onAborted(() => undefined);
      res.cork(() => {
        res.writeStatus('200 OK');
        for (const [k, v] of Object.entries(SSE_HEADERS)) res.writeHeader(k, v);
        res.write(': connected\n\n');
        res.write(ref.raw?.body ?? new Uint8Array(0));
      });
    });
    return new Promise((resolve, reject) => {
      app.listen('127.0.0.1', 0, (listen) => {
        if (listen === false) return reject(new Error('raw SSE: cannot listen'));
        ref.raw = new RawSse(app, listen);
        resolve(ref.raw);
      });
    });
  }

  close(): void {
    uWS.us_listen_socket_close(this.#listen);
    closeApp(this.#app);
  }
}

/** The fanout's frames of one chunk, with rewritable seq digits (9, zero-padded). */
export class FrameTemplate {
  readonly sse: Buffer;
  readonly ws: Buffer;
  readonly #ssePos: number[];
  readonly #wsPos: number[];

  constructor(agentId: string, commandId: string, data: Uint8Array) {
    const facts = {
      agentId,
      commandId,
      stream: 'stdout' as const,
      seq: 100_000_000,
      clock: Date.now() * 1000,
      timestampMs: Date.now(),
      eof: false,
      carry: new Uint8Array(0),
      bytes: data,
    };
    this.sse = Buffer.from(encodeChunkSse(facts));
    this.ws = Buffer.from(encodeChunkWs(facts));
    this.#ssePos = positions(this.sse, '100000000');
    this.#wsPos = positions(this.ws, '100000000');
  }

  /** Rewrites the seq (< 10^9) into both frames. */
  seq(n: number): void {
    const digits = String(n).padStart(9, '0');
    for (const at of this.#ssePos) this.sse.write(digits, at, 'latin1');
    for (const at of this.#wsPos) this.ws.write(digits, at, 'latin1');
  }
}

function positions(buf: Buffer, needle: string): number[] {
  const out: number[] = [];
  for (let at = buf.indexOf(needle); at >= 0; at = buf.indexOf(needle, at + needle.length)) out.push(at);
  return out;
}

export class RawGrpc {
  bytes = 0;
  messages = 0;
  readonly #server: grpc.Server;
  readonly port: number;

  private constructor(server: grpc.Server, port: number) {
    this.#server = server;
    this.port = port;
  }

  /**
   * `consume`, when given, gets each message of each call (the call's first message opens it) and
   * does there what the measured side's consumers do (ingest: hash the bytes).
   */
  static async start(ca: CaMaterial, consume?: () => (message: Buffer) => void): Promise<RawGrpc> {
    const server = new grpc.Server({ 'grpc.max_receive_message_length': 4 * 1024 * 1024 });
    const identity = (b: Buffer): Buffer => b;
    const c = AgentServiceMethods.Connect;
    const ref: { raw?: RawGrpc } = {};
    server.addService(
      {
        Connect: {
          path: c.path,
          requestStream: true,
          responseStream: true,
          requestSerialize: identity,
          requestDeserialize: identity,
          responseSerialize: identity,
          responseDeserialize: identity,
        },
      },
      {
        Connect: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
          call.on('error', () => undefined);
          const consumer = consume?.();
          call.on('data', (b: Buffer) => {
            const raw = ref.raw;
            if (raw === undefined) return;
            raw.bytes += b.length;
            raw.messages++;
            consumer?.(b);
          });
          call.on('end', () => call.end());
        },
      },
    );
    const creds = grpc.ServerCredentials.createSsl(
      Buffer.from(ca.caCertPem),
      [{ cert_chain: Buffer.from(ca.serverCertPem), private_key: Buffer.from(ca.serverKeyPem) }],
      true,
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', creds, (err, p) => (err === null ? resolve(p) : reject(err))),
    );
    ref.raw = new RawGrpc(server, port);
    return ref.raw;
  }

  close(): void {
    this.#server.forceShutdown();
  }
}
