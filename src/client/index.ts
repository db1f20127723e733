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
export {
  PtyCloseCode,
  PtyConnection,
  PTY_WS_BINARY_SUBPROTOCOL,
  PTY_WS_SUBPROTOCOL,
  type PtyClientRef,
  type PtyConnectOptions,
  type PtyErrorInfo,
  type PtyKeyframe,
  type PtyMembership,
  type PtyOutputStream,
  type PtyRole,
  type PtyRoleInfo,
  type PtyServerMessage,
} from './pty-ws.js';
export { parseSseText, SseParser, type SseEvent, type SseParserHandlers } from './sse-parser.js';
export { backoffDelayMs, sseStream, type FetchLike, type SseStreamOptions } from './sse-stream.js';
export { pollUntil, type PollOptions } from './wait.js';
export * from './types.js';
export { parseJsonData, taskLogEvent } from './stream-events.js';
