/**
 * Run a request through a Router without sockets, the same way the uWS listener does (match,
 * body limit and policy, handler, envelope rendering). For handler tests; SSE results come back
 * unstarted, to be driven with a {@link MemorySseSink}.
 */
import { BodyCollector, declaredBodyLength, DEFAULT_MAX_BODY_BYTES, tooLarge } from './body.js';
import { dispatch, renderError, type InternalErrorHook, type Rendered, type RenderedSse, type RenderedStream } from './dispatch.js';
import type { Router } from './router.js';
import { LOCAL_PEER, type RequestPeer, type SseSink } from './types.js';

export interface InjectRequest {
  method: string;
  /** Path with an optional query string, e.g. `/api/v1/tasks?limit=5`. */
  url: string;
  /** Header names in any case. */
  headers?: Record<string, string>;
  /** A string or bytes are sent as is; anything else is JSON-encoded with Content-Type application/json. */
  body?: unknown;
  remoteAddress?: string;
  /** Default: the trusted local listener's peer. */
  peer?: RequestPeer;
}

export interface InjectResponse {
  readonly status: number;
  /** Lower-case names, including content-type. */
  readonly headers: Record<string, string>;
  readonly text: string;
  /** Present when the route answered with an SSE stream. */
  readonly sse?: RenderedSse;
  json(): unknown;
}

/** Inject one request. Never rejects for request errors: they come back as envelopes. */
export async function inject(
  router: Router,
  req: InjectRequest,
  opts: { maxBodyBytes?: number; onInternalError?: InternalErrorHook } = {},
): Promise<InjectResponse> {
  const q = req.url.indexOf('?');
  const path = q < 0 ? req.url : req.url.slice(0, q);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers ?? {})) headers[k.toLowerCase()] = v;
  let rawBody: Uint8Array | null = null;
  if (req.body !== undefined) {
    if (typeof req.body === 'string') rawBody = new TextEncoder().encode(req.body);
    else if (req.body instanceof Uint8Array) rawBody = req.body;
    else {
      rawBody = new TextEncoder().encode(JSON.stringify(req.body));
      headers['content-type'] ??= 'application/json';
    }
    headers['content-length'] ??= String(rawBody.byteLength);
  }
  const raw = {
    method: req.method.toUpperCase(),
    path,
    query: new URLSearchParams(q < 0 ? '' : req.url.slice(q + 1)),
    headers,
    remoteAddress: req.remoteAddress ?? '127.0.0.1',
    peer: req.peer ?? LOCAL_PEER,
  };
  const match = router.match(raw.method, path);
  if (!match.ok) return toResponse(renderError(match.error, match.allow ? { allow: match.allow.join(', ') } : {}));
  const route = match.route;
  const limit = route.maxBodyBytes ?? opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (route.body !== 'none' && rawBody !== null) {
    try {
      const collector = new BodyCollector(limit, declaredBodyLength(headers, limit));
      if (!collector.push(rawBody)) return toResponse(renderError(tooLarge(limit)));
      rawBody = collector.finish();
    } catch (err) {
      return toResponse(renderError(err));
    }
  }
  const onInternalError = opts.onInternalError ?? (() => undefined);
  const rendered = await dispatch(route, match.params, raw, route.body === 'none' ? null : rawBody, onInternalError);
  return rendered.kind === 'stream' ? drainStream(rendered) : toResponse(rendered);
}

/** A streamed body is read whole (tests of handlers use small files; the listeners stream it). */
async function drainStream(r: RenderedStream): Promise<InjectResponse> {
  const parts: Uint8Array[] = [];
  try {
    for (let chunk = await r.source.next(); chunk !== null; chunk = await r.source.next()) parts.push(Uint8Array.from(chunk));
  } finally {
    await r.source.close();
  }
  const headers = { ...r.headers, 'content-length': String(r.lengthBytes) };
  return toResponse({ kind: 'body', status: r.status, headers, contentType: r.contentType, body: Buffer.concat(parts) });
}

function toResponse(r: Exclude<Rendered, RenderedStream>): InjectResponse {
  if (r.kind === 'sse') {
    return { status: 200, headers: { 'content-type': 'text/event-stream' }, text: '', sse: r, json: () => undefined };
  }
  const text = typeof r.body === 'string' ? r.body : new TextDecoder().decode(r.body);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers)) headers[k.toLowerCase()] = v;
  headers['content-type'] = r.contentType;
  return { status: r.status, headers, text, json: () => JSON.parse(text) as unknown };
}

/**
 * An in-memory SseSink: records frames, and lets a test switch backpressure on and off
 * (`setBackpressure(false)` fires the onWritable callbacks).
 */
export class MemorySseSink implements SseSink {
  readonly frames: string[] = [];
  #closed = false;
  #backpressure = false;
  #buffered = 0;
  readonly #writable: Array<() => void> = [];
  readonly #close: Array<() => void> = [];
  /** Frames are decoded to text on write, like uWS copying them. */
  readonly copiesWrites = true;

  write(frame: Uint8Array | string): boolean {
    if (this.#closed) return false;
    const text = typeof frame === 'string' ? frame : new TextDecoder().decode(frame);
    this.frames.push(text);
    if (this.#backpressure) this.#buffered += Buffer.byteLength(text);
    return !this.#backpressure;
  }
  onWritable(cb: () => void): void {
    this.#writable.push(cb);
  }
  onClose(cb: () => void): void {
    if (this.#closed) cb();
    else this.#close.push(cb);
  }
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const cb of this.#close.splice(0)) cb();
  }
  get closed(): boolean {
    return this.#closed;
  }
  bufferedBytes(): number {
    return this.#buffered;
  }
  setBackpressure(on: boolean): void {
    this.#backpressure = on;
    if (!on) {
      this.#buffered = 0;
      for (const cb of this.#writable) cb();
    }
  }
}
