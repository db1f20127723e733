/**
 * The HTTP plumbing under ApiClient: URLs, JSON requests with a deadline, error mapping to
 * ApiError, and SSE streams. Isomorphic: only fetch, URL, AbortController and TextDecoder.
 */
import { aborted, ApiError, errorFromResponse, isAbortError, networkError } from './api-error.js';
import type { SseEvent } from './sse-parser.js';
import { sseStream, type FetchLike, type SseStreamOptions } from './sse-stream.js';

/** A WebSocket constructor with the browser's API (the global one, or the `ws` package's). */
export interface WebSocketLike {
  readonly readyState: number;
  readonly protocol: string;
  binaryType: string;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string | Uint8Array | ArrayBuffer): void;
  close(code?: number, reason?: string): void;
}
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

export interface ApiClientOptions {
  /**
   * The HTTP listener, e.g. `http://127.0.0.1:8122` (a trailing slash and path prefix are kept).
   * `''` in a browser page means the page's own origin.
   */
  baseUrl: string;
  /** Default: the global fetch. */
  fetch?: FetchLike;
  /** Needed for openPty; default: the global WebSocket when there is one. */
  WebSocket?: WebSocketConstructor;
  /** Sent with every request (e.g. a User-Agent in Node). */
  headers?: Record<string, string>;
  /** Deadline of one JSON request, ms. Default 30 000. Streams have none. */
  timeoutMs?: number;
}

export interface RequestOptions {
  signal?: AbortSignal;
  headers?: Record<string, string>;
  /** Overrides the client's deadline for this request (ms; 0 = none). */
  timeoutMs?: number;
  /** Statuses that are not errors for this call (e.g. 503 of /readyz carries a body). */
  acceptStatus?: readonly number[];
}

export type Query = Record<string, string | number | boolean | undefined | readonly string[]>;

/** `?a=1&b=x` from the defined entries (arrays become comma-separated lists). */
export function queryString(q: Query | undefined): string {
  if (q === undefined) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined) continue;
    params.set(k, typeof v === 'object' ? v.join(',') : String(v));
  }
  const s = params.toString();
  return s === '' ? '' : `?${s}`;
}

/** Percent-encodes one path segment. */
export const seg = (s: string): string => encodeURIComponent(s);

export class HttpTransport {
  readonly baseUrl: string;
  readonly #fetch: FetchLike;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  protected readonly webSocketCtor: WebSocketConstructor | undefined;

  constructor(opts: ApiClientOptions) {
    this.baseUrl = opts.baseUrl.endsWith('/') ? opts.baseUrl.slice(0, -1) : opts.baseUrl;
    if (opts.fetch === undefined && typeof globalThis.fetch !== 'function') throw new TypeError('no fetch: pass options.fetch');
    // Browsers refuse fetch called with another `this`.
    this.#fetch = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#headers = { ...opts.headers };
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.webSocketCtor = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  }

  /** Absolute (or, with baseUrl '', origin-relative) URL of an API path. */
  url(path: string, query?: Query): string {
    return `${this.baseUrl}${path}${queryString(query)}`;
  }

  /** The ws:// or wss:// URL of a path on the HTTP listener. */
  wsUrl(path: string): string {
    const base = this.baseUrl !== '' ? this.baseUrl : ((globalThis as { location?: { origin: string } }).location?.origin ?? '');
    return `${base.replace(/^http(s?):/i, 'ws$1:')}${path}`;
  }

  #origin(): string {
    return this.baseUrl === '' ? 'the server' : this.baseUrl;
  }

  /** A request whose 2xx body is JSON (or empty: undefined). */
  async requestJson<T>(method: string, path: string, body?: unknown, opts: RequestOptions = {}): Promise<T> {
    const res = await this.request(method, path, body, opts);
    const text = await res.text();
    if (text === '') return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new ApiError(res.status, 'protocol', `${method} ${path}: the response is not JSON`, { cause: err });
    }
  }

  /**
   * A request; resolves with the response when its status is 2xx (or accepted), rejects with
   * ApiError otherwise. The deadline covers the headers only; read the body promptly.
   */
  async request(method: string, path: string, body?: unknown, opts: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json', ...this.#headers, ...opts.headers };
    const init: RequestInit = { method, headers };
    if (body instanceof Uint8Array) {
      // Raw bytes (scoped storage uploads) go as they are.
      headers['content-type'] ??= 'application/octet-stream';
      init.body = body;
    } else if (body !== undefined) {
      headers['content-type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const ctl = new AbortController();
    init.signal = ctl.signal;
    const userSignal = opts.signal;
    if (aborted(userSignal)) throw abortError();
    const onAbort = (): void => ctl.abort();
    userSignal?.addEventListener('abort', onAbort, { once: true });
    const timeoutMs = opts.timeoutMs ?? this.#timeoutMs;
    let timedOut = false;
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            ctl.abort();
          }, timeoutMs)
        : undefined;
    (timer as { unref?: () => void } | undefined)?.unref?.();
    try {
      let res: Response;
      try {
        res = await this.#fetch(this.url(path), init);
      } catch (err) {
        if (timedOut)
          throw new ApiError(0, 'timeout', `${method} ${path}: no response from ${this.#origin()} within ${timeoutMs} ms`, { cause: err });
        if (isAbortError(err) || aborted(userSignal)) throw err;
        throw networkError(this.#origin(), err);
      }
      if (res.ok || opts.acceptStatus?.includes(res.status) === true) return res;
      const text = await res.text().catch(() => '');
      throw errorFromResponse(res.status, res.statusText, text, res.headers.get('retry-after'));
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      userSignal?.removeEventListener('abort', onAbort);
    }
  }

  /** An SSE stream of a path; `url` builds the query for each (re)connection from the last event id. */
  sse(
    path: string,
    query: (lastEventId: string | undefined) => Query,
    opts: Omit<SseStreamOptions, 'fetch' | 'url' | 'headers'> & { headers?: Record<string, string> } = {},
  ): AsyncGenerator<SseEvent, void, undefined> {
    return sseStream({
      ...opts,
      fetch: this.#fetch,
      url: (id) => this.url(path, query(id)),
      headers: { ...this.#headers, ...opts.headers },
    });
  }
}

/** The error an aborted call rejects with (what fetch uses). */
export function abortError(): Error {
  const e = new Error('the operation was aborted');
  e.name = 'AbortError';
  return e;
}
