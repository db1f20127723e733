/**
 * The socket-free contract between route handlers and the uWS boundary (STYLE point 12).
 *
 * Handlers see a {@link RequestView} (a plain copy of the request: uWS's request object is
 * stack-allocated and dies when its callback returns) and return a {@link HandlerResult}.
 * Nothing here knows about sockets, so handlers are tested with `inject()` (src/http/inject.ts).
 */

/** A copied, parsed request. Every field is safe to keep after the uWS callback returned. */
export interface RequestView {
  /** Upper-case method (`GET`, `POST`, ...). */
  readonly method: string;
  /** The request path, still percent-encoded, without the query string (e.g. `/api/v1/agents/a%20b`). */
  readonly path: string;
  readonly query: URLSearchParams;
  /** Header names are lower-case; repeated headers are joined with `, ` (as node:http does). */
  readonly headers: Readonly<Record<string, string>>;
  /** Route parameters (`:id` → `params.id`), percent-decoded. A trailing `*` segment is `params['*']`. */
  readonly params: Readonly<Record<string, string>>;
  /** Parsed JSON on `body: 'json'` routes; `undefined` when no body was sent or the route reads none. */
  readonly body: unknown;
  /** The raw body bytes (`null` when the route reads no body or none was sent). */
  readonly rawBody: Uint8Array | null;
  /** Peer IP address as text (`127.0.0.1`, `::1`). */
  readonly remoteAddress: string;
  /**
   * Who is on the other end, as the listener established it: `local` on the plaintext loopback
   * listener (the spec's trusted local listener), `mtls` with the verified client certificate's
   * SPIFFE ID on the admin listener. Set by the listener only: nothing in headers or bodies can
   * claim it. Routes read it through the one operator-identity function (src/auth).
   */
  readonly peer: RequestPeer;
}

/** The transport identity of a request (see RequestView.peer). */
export type RequestPeer =
  | { readonly transport: 'local' }
  | {
      readonly transport: 'mtls';
      /** The verified client certificate's SPIFFE URI SAN (`spiffe://<trust domain>/operator/<name>`), or null when it has none. */
      readonly spiffeId: string | null;
      /** The certificate's SHA-256 fingerprint (colon-separated hex), for logs and audit records. */
      readonly fingerprint256: string;
    };

/** The peer of every request on the plaintext loopback listener. */
export const LOCAL_PEER: RequestPeer = Object.freeze({ transport: 'local' });

/** A JSON response; `json` is serialised with the route's compiled schema when it has one (2xx only). */
export interface JsonResult {
  status: number;
  headers?: Record<string, string>;
  json: unknown;
}

/** A raw response (metrics text, downloads). */
export interface RawResult {
  status: number;
  headers?: Record<string, string>;
  body: Uint8Array | string;
  contentType: string;
}

/**
 * A server-sent-events stream. The server writes the status line and the SSE headers, then calls
 * `sse` once. The stream stays open after `sse` returns (or its promise settles) until the
 * producer calls `sink.close()`, the client goes away, or the server stops.
 */
export interface SseResult {
  sse: (sink: SseSink, req: RequestView) => void | Promise<void>;
}

/**
 * A response whose body is pulled from `source` one chunk at a time (file downloads). The server
 * sends Content-Length `lengthBytes` and asks for the next chunk only once the previous one was
 * handed to the kernel (uWS tryEnd/onWritable, node's drain), so at most one chunk per response is
 * held in memory however large the body. `source.close()` runs exactly once when the response
 * ends for any reason (sent, client gone, a read failed, server stop).
 */
export interface StreamResult {
  status: number;
  headers?: Record<string, string>;
  contentType: string;
  /** Exact body size in bytes; a source that ends early or runs long aborts the connection. */
  lengthBytes: number;
  stream: ByteSource;
}

/** Where a {@link StreamResult} pulls its body from. */
export interface ByteSource {
  /** The next chunk, or null at the end. The chunk's memory is the server's until the next call. */
  next(): Promise<Uint8Array | null>;
  close(): Promise<void>;
}

export type HandlerResult = JsonResult | RawResult | SseResult | StreamResult;

/** Route handler: throw (or reject with) an SvcError to answer with its v1 envelope and status. */
export type Handler = (req: RequestView) => HandlerResult | Promise<HandlerResult>;

/**
 * Where an SSE producer writes. Frames must be complete SSE events or comments (each ends with a
 * blank line / newline) because the server may insert `:` comment lines between frames.
 */
export interface SseSink {
  /**
   * Queue a frame. Returns false under backpressure: the frame IS queued, but the producer should
   * stop writing until `onWritable` fires (or drop/resume the subscriber by its own policy).
   * Writing after `closed` is a no-op returning false.
   */
  write(frame: Uint8Array | string): boolean;
  /** Called each time a backpressured stream has drained enough to write again. */
  onWritable(cb: () => void): void;
  /** Called once when the stream ends for any reason (client gone, `close()`, server stop). */
  onClose(cb: () => void): void;
  /** End the stream (terminating chunk); idempotent. */
  close(): void;
  readonly closed: boolean;
  /**
   * Upper bound of bytes queued inside the server and not yet taken by the kernel: the bytes
   * written since the last write that went out without backpressure (0 when not backpressured).
   */
  bufferedBytes(): number;
  /** True when `write` has copied the frame once it returns, so the caller may reuse its memory. */
  readonly copiesWrites?: boolean;
}

/** How a route reads its body. */
export type BodyMode = 'json' | 'none' | 'raw';

/** One finished request, for metrics and access logs (`onRequest` hook of the listener). */
export interface RequestInfo {
  readonly method: string;
  /** The matched route pattern, or `(unmatched)`; never the raw path (bounded label). */
  readonly route: string;
  /** Status sent; 0 when the client went away before a response was sent. */
  readonly status: number;
  /** The error code when the response was an error envelope. */
  readonly errorCode?: string;
  readonly durationMs: number;
  /** True when the client disconnected before the response was complete. */
  readonly aborted: boolean;
}
