/**
 * Socket-free request pipeline: body parsing, the handler call and rendering of its result or its
 * error into bytes. The uWS listener and `inject()` share it, so what tests see is what clients get.
 */
import fastJson from 'fast-json-stringify';
import { ERROR_TABLE, SvcError, toWire, type ErrorCode } from '../core/errors.js';
import { DEFAULT_BODY_TIMEOUT_MS, DEFAULT_MAX_BODY_BYTES, parseBody } from './body.js';
import type { Route, Router } from './router.js';
import type { ByteSource, HandlerResult, RequestPeer, RequestView, SseResult } from './types.js';

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The copied parts of a request, before its route's body policy is applied. */
export interface RawRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: Readonly<Record<string, string>>;
  readonly remoteAddress: string;
  readonly peer: RequestPeer;
}

/** A complete response ready to be written. */
export interface RenderedBody {
  readonly kind: 'body';
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly contentType: string;
  readonly body: Uint8Array | string;
  /** Set when the body is a v1 error envelope. */
  readonly errorCode?: ErrorCode;
}

/** An SSE stream to start; `view` is what the producer gets as its request. */
export interface RenderedSse {
  readonly kind: 'sse';
  readonly start: SseResult['sse'];
  readonly view: RequestView;
}

/** A streamed body (StreamResult) to write by backpressure; the listener owns `source` from here. */
export interface RenderedStream {
  readonly kind: 'stream';
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly contentType: string;
  readonly lengthBytes: number;
  readonly source: ByteSource;
}

export type Rendered = RenderedBody | RenderedSse | RenderedStream;

/** Called for every failure that is not an SvcError (it becomes a 500 `server.internal`). */
export type InternalErrorHook = (err: unknown, route: string) => void;

// The envelope is the hottest error path (404 floods, 413s): serialise it with a compiled schema.
const serializeEnvelope = fastJson({
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: { code: { type: 'string' }, message: { type: 'string' } },
      required: ['code', 'message'],
    },
  },
  required: ['error'],
}) as (value: unknown) => string;

/**
 * Render any thrown value as the spec's v1 envelope. SvcErrors keep their code and message;
 * everything else is 500 `server.internal` with a generic message (details go to the log only).
 */
export function renderError(err: unknown, extraHeaders: Readonly<Record<string, string>> = {}): RenderedBody {
  const wire = err instanceof SvcError ? err.toWire() : toWire(err);
  // An error that knows when to come back (an open hypervisor circuit, idempotency.in_progress)
  // carries details.retryAfterSeconds; every such response gets a Retry-After header.
  const retryAfter = wire.details?.['retryAfterSeconds'];
  const headers =
    typeof retryAfter === 'number' &&
    Number.isFinite(retryAfter) &&
    retryAfter >= 0 &&
    extraHeaders['retry-after'] === undefined &&
    extraHeaders['Retry-After'] === undefined
      ? { ...extraHeaders, 'retry-after': String(Math.ceil(retryAfter)) }
      : extraHeaders;
  return {
    kind: 'body',
    status: ERROR_TABLE[wire.code].http,
    headers,
    contentType: JSON_CONTENT_TYPE,
    body: serializeEnvelope({ error: { code: wire.code, message: wire.message } }),
    errorCode: wire.code,
  };
}

/** True when `err` will render as a 500 `server.internal` (and so must be logged and counted). */
export function isInternal(err: unknown): boolean {
  return toWire(err).code === 'server.internal';
}

/** Default limit of a request target plus its headers: 16 KiB. */
export const DEFAULT_MAX_HEADER_BYTES = 16 * 1024;

/** Listener-wide defaults a route may override. */
export interface ListenerLimits {
  /** Request target plus headers above this is 400 `request.invalid`. Default 16 KiB. */
  readonly maxHeaderBytes?: number | undefined;
  /** Body limit for routes without their own. Default 1 MiB. */
  readonly maxBodyBytes?: number | undefined;
  /** Time to receive a whole body for routes without their own. Default 30 s. */
  readonly bodyTimeoutMs?: number | undefined;
}

/** What every listener takes besides its transport: the limits, the SSE heartbeat, the close grace. */
export interface ListenerTuning extends ListenerLimits {
  /** Interval of the `: ping` SSE comment. Default 15 s. */
  readonly sseHeartbeatMs?: number | undefined;
  /** How long close() lets in-flight requests finish before force-closing. Default 2 s. */
  readonly closeGraceMs?: number | undefined;
}

/**
 * What every listener does first with a copied request: the header limit, then the route. Not
 * ok: the error to answer, and whether to close the connection after it (an oversized head).
 */
export function routeRequest(
  router: Router,
  raw: RawRequest,
  headerBytes: number,
  limits: ListenerLimits,
):
  | { readonly ok: true; readonly route: Route; readonly params: Record<string, string> }
  | { readonly ok: false; readonly rendered: RenderedBody; readonly closeConnection: boolean } {
  const maxHeaderBytes = limits.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES;
  if (headerBytes > maxHeaderBytes) {
    const err = new SvcError('request.invalid', `request target and headers exceed ${maxHeaderBytes} bytes`);
    return { ok: false, rendered: renderError(err), closeConnection: true };
  }
  const match = router.match(raw.method, raw.path);
  if (!match.ok)
    return { ok: false, rendered: renderError(match.error, match.allow ? { allow: match.allow.join(', ') } : {}), closeConnection: false };
  return match;
}

/** The body limit and receive deadline of `route` on a listener with `limits`. */
export function bodyLimits(route: Route, limits: ListenerLimits): { readonly maxBytes: number; readonly timeoutMs: number } {
  return {
    maxBytes: route.maxBodyBytes ?? limits.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    timeoutMs: route.bodyTimeoutMs ?? limits.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS,
  };
}

/**
 * Run a matched route: apply its body policy, call the handler, render the result. Never rejects:
 * every failure becomes an envelope, and non-SvcErrors are reported to `onInternalError`.
 */
export async function dispatch(
  route: Route,
  params: Record<string, string>,
  raw: RawRequest,
  rawBody: Uint8Array | null,
  onInternalError: InternalErrorHook,
): Promise<Rendered> {
  try {
    const view: RequestView = {
      method: raw.method,
      path: raw.path,
      query: raw.query,
      headers: raw.headers,
      params,
      body: parseBody(route.body, raw.headers, rawBody),
      rawBody: route.body === 'none' ? null : rawBody,
      remoteAddress: raw.remoteAddress,
      peer: raw.peer,
    };
    const result = await route.handler(view);
    return renderResult(route, result, view);
  } catch (err) {
    if (isInternal(err)) onInternalError(err, route.pattern);
    return renderError(err);
  }
}

function renderResult(route: Route, result: HandlerResult, view: RequestView): Rendered {
  if (typeof result !== 'object' || result === null) throw new TypeError(`handler of ${route.pattern} returned ${typeof result}`);
  if ('sse' in result) return { kind: 'sse', start: result.sse, view };
  if (!Number.isInteger(result.status) || result.status < 100 || result.status > 599) {
    throw new TypeError(`handler of ${route.pattern} returned status ${String(result.status)}`);
  }
  const headers = result.headers ?? {};
  if ('stream' in result) {
    try {
      checkHeaders(headers);
      if (!Number.isSafeInteger(result.lengthBytes) || result.lengthBytes < 0) {
        throw new TypeError(`handler of ${route.pattern} returned a stream of ${String(result.lengthBytes)} bytes`);
      }
    } catch (err) {
      result.stream.close().catch(() => undefined);
      throw err;
    }
    return {
      kind: 'stream',
      status: result.status,
      headers,
      contentType: result.contentType,
      lengthBytes: result.lengthBytes,
      source: result.stream,
    };
  }
  checkHeaders(headers);
  if ('json' in result) {
    const body = route.serialize !== undefined ? route.serialize(result.json) : (JSON.stringify(result.json) ?? 'null');
    return { kind: 'body', status: result.status, headers, contentType: JSON_CONTENT_TYPE, body };
  }
  return { kind: 'body', status: result.status, headers, contentType: result.contentType, body: result.body };
}

const HEADER_VALUE_OK = /^[^\r\n]*$/;
const HEADER_NAME_OK = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Throws on header names/values that could split the response (a handler bug: becomes a 500). */
function checkHeaders(headers: Readonly<Record<string, string>>): void {
  for (const [k, v] of Object.entries(headers)) {
    if (!HEADER_NAME_OK.test(k) || !HEADER_VALUE_OK.test(v)) throw new TypeError(`invalid response header ${JSON.stringify(k)}`);
  }
}
