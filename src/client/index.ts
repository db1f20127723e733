/**
 * The public client of sandboxd's HTTP/WS API (dashboard and sbx). Import from here.
 */
export { ApiClient, type ArtifactDownload, type StreamOptions, type WaitOptions } from './api-client.js';
export { ApiError, CLIENT_ERROR_CODES, errorFromResponse, isAbortError } from './api-error.js';
export { base64ToBytes, bytesToBase64 } from './base64.js';
export {
  queryString,
  type ApiClientOptions,
  type RequestOptions,
  type WebSocketConstructor,
  type WebSocketLike,
} from './http-transport.js';
export { PtyConnection, PTY_WS_SUBPROTOCOL, type PtyConnectOptions } from './pty-ws.js';
export { parseSseText, SseParser, type SseEvent, type SseParserHandlers } from './sse-parser.js';
export { backoffDelayMs, sseStream, type FetchLike, type SseStreamOptions } from './sse-stream.js';
export { pollUntil, type PollOptions } from './wait.js';
export * from './types.js';
export { parseJsonData, taskLogEvent } from './stream-events.js';
