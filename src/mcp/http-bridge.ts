/**
 * The MCP SDK's streamable HTTP transport on our socket-free handler contract: the request view
 * becomes a web `Request` for WebStandardStreamableHTTPServerTransport, and its `Response` becomes
 * a handler result — an SSE response (a POST carrying a request: progress notifications, then the
 * response) an SseResult, anything else (JSON-RPC errors, 202 for notifications) a RawResult with
 * the SDK's status, headers and body.
 *
 * Stateless: a fresh server and transport per HTTP request (the SDK's stateless mode refuses to
 * reuse one). Each frame the SDK enqueues is one complete SSE event, written to the sink as is;
 * the stream is read only while the sink is writable, so a slow client is paced by its socket.
 * When the stream ends (the response was sent) or the client goes away, the server is closed,
 * which aborts the signal of a tool still running (run_command then kills its command).
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { HandlerResult, RequestView, SseSink } from '../http/types.js';

/** Request headers that describe the connection, not the message: not handed to the SDK. */
const HOP_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'te', 'trailer']);
/** Response headers the listener sets itself. */
const OWN_RESPONSE_HEADERS = new Set(['content-type', 'content-length', 'connection', 'transfer-encoding', 'cache-control']);

/** Longest a listener may take to start an SSE answer before its server is closed (ms). */
export const kSseStartWatchdogMs = 30_000;

/** The request as the SDK's transport takes it. */
export function toWebRequest(req: RequestView): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) if (!HOP_HEADERS.has(name)) headers.set(name, value);
  const query = req.query.toString();
  const url = `https://${req.headers['host'] ?? 'localhost'}${req.path}${query === '' ? '' : `?${query}`}`;
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && req.rawBody !== null;
  return new Request(url, { method: req.method, headers, ...(hasBody && { body: req.rawBody }) });
}

/** Serves one HTTP request with `server` (which this then owns and closes; `onClosed` runs once it is). */
export async function serveMcpRequest(req: RequestView, server: McpServer, onClosed?: () => void): Promise<HandlerResult> {
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= server
      .close()
      .catch(() => undefined)
      .finally(onClosed));
  let response: Response;
  try {
    // No sessionIdGenerator: stateless. keepAliveMs 0: the listeners write their own SSE heartbeats.
    const transport = new WebStandardStreamableHTTPServerTransport({ keepAliveMs: 0 });
    await server.connect(transport);
    response = await transport.handleRequest(toWebRequest(req));
  } catch (err) {
    await close();
    throw err;
  }
  const contentType = response.headers.get('content-type') ?? '';
  const body = response.body;
  if (body !== null && contentType.startsWith('text/event-stream')) {
    // A client gone before the listener started the stream never calls `sse`: the watchdog closes
    // the server then, so a tool it runs is aborted rather than left to its own timeout.
    const watchdog = setTimeout(() => void close(), kSseStartWatchdogMs);
    watchdog.unref();
    return {
      sse: (sink) => {
        clearTimeout(watchdog);
        return pump(body, sink, close);
      },
    };
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  await close();
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    if (!OWN_RESPONSE_HEADERS.has(name)) headers[name] = value;
  });
  return { status: response.status, headers, body: bytes, contentType: contentType === '' ? 'application/octet-stream' : contentType };
}

/** Copies the SDK's SSE frames to the sink, paced by its backpressure; closes both ends and the server at the end. */
async function pump(body: ReadableStream<Uint8Array>, sink: SseSink, close: () => Promise<void>): Promise<void> {
  const reader = body.getReader();
  let wake: (() => void) | undefined;
  sink.onWritable(() => wake?.());
  sink.onClose(() => {
    // The client went away (or the stream ended): stop reading, abort what still runs.
    reader.cancel().catch(() => undefined);
    wake?.();
    void close();
  });
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done || sink.closed) break;
      if (!sink.write(next.value) && !sink.closed) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
    }
  } catch {
    // The stream was cancelled or errored: nothing more to write.
  } finally {
    sink.close();
    await close();
  }
}
