/**
 * The low-level uWS touch points shared by the HTTP and WS listeners: copying a request out of
 * the stack-allocated `HttpRequest`, writing a rendered response (always corked), closing an App,
 * and telling the native binary from the package's JS fallback.
 */
import { STATUS_CODES } from 'node:http';
import uWS from '@trufflesuite/uws-js-unofficial';
import type { HttpRequest, HttpResponse, TemplatedApp } from '@trufflesuite/uws-js-unofficial';
import type { RawRequest, RenderedBody } from './dispatch.js';
import { LOCAL_PEER } from './types.js';

/** A copied request plus its size on the wire (request target and header bytes, approximately). */
export interface CopiedRequest extends RawRequest {
  readonly headerBytes: number;
}

const decoder = new TextDecoder();

/** Copy everything we need from `req`, synchronously (uWS invalidates it when the callback returns). */
export function copyRequest(res: HttpResponse, req: HttpRequest): CopiedRequest {
  const path = req.getUrl();
  // getQuery() returns undefined (not '') when there is no query string.
  const rawQuery = (req.getQuery() as string | undefined) ?? '';
  // Null prototype: a header named __proto__ must stay a plain entry.
  const headers = Object.create(null) as Record<string, string>;
  let headerBytes = path.length + rawQuery.length;
  req.forEach((name, value) => {
    headerBytes += name.length + value.length + 4;
    const prev = headers[name];
    headers[name] = prev === undefined ? value : `${prev}, ${value}`;
  });
  return {
    method: req.getMethod().toUpperCase(),
    path,
    query: new URLSearchParams(rawQuery),
    headers,
    remoteAddress: decoder.decode(res.getRemoteAddressAsText()),
    peer: LOCAL_PEER,
    headerBytes,
  };
}

const statusLines = new Map<number, string>();

/** `"404 Not Found"` for uWS writeStatus, cached per code. */
export function statusLine(status: number): string {
  let line = statusLines.get(status);
  if (line === undefined) {
    line = `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
    statusLines.set(status, line);
  }
  return line;
}

/**
 * Write a complete response, corked. uWS adds Content-Length itself (`end`) or from
 * `endWithoutBody(length)` for HEAD, so handler-set content-length/content-type are ignored.
 */
export function writeRendered(res: HttpResponse, r: RenderedBody, opts: { head: boolean; closeConnection: boolean }): void {
  res.cork(() => {
    res.writeStatus(statusLine(r.status));
    for (const [k, v] of Object.entries(r.headers)) {
      const lower = k.toLowerCase();
      if (lower !== 'content-length' && lower !== 'content-type') res.writeHeader(k, v);
    }
    res.writeHeader('content-type', r.contentType);
    if (opts.head) {
      const length = typeof r.body === 'string' ? Buffer.byteLength(r.body) : r.body.byteLength;
      res.endWithoutBody(length, opts.closeConnection);
    } else {
      res.end(r.body, opts.closeConnection);
    }
  });
}

/** `App.close()` (force-closes every socket) exists in the native build; the JS fallback may lack it. */
export function closeApp(app: TemplatedApp): void {
  const close = (app as unknown as { close?: () => void }).close;
  if (typeof close === 'function') close.call(app);
}

/** Which uWS implementation was loaded: the native binary, or the package's JS fallback (see assertNativeUws). */
export function uwsRuntimeInfo(): { native: boolean; detail: string } {
  const native = String(uWS.App).includes('[native code]');
  const abi = `${process.platform}-${process.arch} node ABI ${process.versions.modules}`;
  return native
    ? { native, detail: `native uWebSockets.js binary (${abi})` }
    : { native, detail: `JS fallback of uws-js-unofficial (UWS_USE_FALLBACK set, or no binary for ${abi})` };
}

/**
 * Refuse to run on the package's JS fallback: it is a partial stub (probed: HttpRequest.forEach
 * and getQuery, HttpResponse.onWritable, getRemoteAddressAsText, endWithoutBody and upgrade throw
 * "Not implemented"), so serving on it would fail per request instead of once, loudly, at start.
 */
export function assertNativeUws(): void {
  const runtime = uwsRuntimeInfo();
  if (!runtime.native) {
    throw new Error(
      `uWebSockets.js native binary not loaded: ${runtime.detail}; sandboxd needs Node 20 (ABI 115) and UWS_USE_FALLBACK unset`,
    );
  }
}
