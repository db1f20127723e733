/**
 * Chat SSE events (spec 4.7 and part 6): named events with JSON data and ids `{session}-{seq}`,
 * seq monotonic from 1 within one projection. Every data object carries `session_id` and
 * `raw_ref` {command_id, line} (the 1-based output line it came from; 0 for frames that come
 * from no line, such as an interruption), plus `role` and `kind` as in the external chat-stream
 * envelope the spec follows. Per event:
 *
 * | event | role | kind | fields |
 * |---|---|---|---|
 * | status | system | status | status (the system subtype, e.g. `init`), content, model? |
 * | delta | assistant | message | content (assistant text), parent_tool_id? |
 * | tool_call | assistant | tool_call | tool_id, name, input, parent_tool_id? |
 * | tool_result | tool | tool_result | tool_id, status (`ok` \| `error`), content (text), parent_tool_id? |
 * | done | status | usage | finish_reason (`stop` \| `error`), model (null when unknown), usage (null when absent), subtype?, total_cost_usd?, duration_ms?, num_turns?, content? (the result text) |
 * | error | system | error | error (message), code (`STREAM_INTERRUPTED`, `NO_RESULT`, ...) |
 * | raw | system | raw | content (the line as printed), truncated? (the line was longer than the cap) |
 *
 * done and error are terminal: a stream ends after one of them.
 */

export type ChatEventName = 'delta' | 'tool_call' | 'tool_result' | 'status' | 'done' | 'error' | 'raw';

/** One projected event. `data` is plain JSON. */
export interface ChatEvent {
  /** `{session}-{seq}`. */
  readonly id: string;
  readonly seq: number;
  readonly event: ChatEventName;
  readonly data: Readonly<Record<string, unknown>>;
}

/** Error codes of chat `error` frames. */
export const ChatErrorCode = {
  /** The command is unknown or its output expired, or the subscriber was cut off (spec 4.7). */
  kStreamInterrupted: 'STREAM_INTERRUPTED',
  /** The command's output ended without a result line. */
  kNoResult: 'NO_RESULT',
} as const;

/** `{session}-{seq}`. */
export function chatEventId(sessionId: string, seq: number): string {
  return `${sessionId}-${seq}`;
}

/**
 * Parses a chat Last-Event-ID: splits at the LAST `-` (session ids contain dashes), the part
 * after it must be a decimal seq. Null when malformed.
 */
export function parseChatCursor(text: string): { sessionId: string; seq: number } | null {
  const at = text.lastIndexOf('-');
  if (at <= 0) return null;
  const digits = text.slice(at + 1);
  if (!/^\d{1,15}$/.test(digits)) return null;
  return { sessionId: text.slice(0, at), seq: Number(digits) };
}

/**
 * A terminal `error` event outside any projection (unknown or expired command: code
 * STREAM_INTERRUPTED). `seq` continues the subscriber's sequence (its cursor + 1, or 1).
 */
export function chatErrorEvent(sessionId: string, commandId: string, seq: number, code: string, message: string): ChatEvent {
  return {
    id: chatEventId(sessionId, seq),
    seq,
    event: 'error',
    data: { session_id: sessionId, raw_ref: { command_id: commandId, line: 0 }, role: 'system', kind: 'error', error: message, code },
  };
}

const utf8 = new TextEncoder();

function oneLine(s: string): string {
  return s.replace(/[\r\n]/g, ' ');
}

/** `id: …\nevent: …\ndata: <json>\n\n`, encoded once for every subscriber of the projection. */
export function encodeChatSse(ev: ChatEvent): Uint8Array {
  // JSON.stringify escapes CR and LF inside strings, so the data is always one line.
  return utf8.encode(`id: ${oneLine(ev.id)}\nevent: ${ev.event}\ndata: ${JSON.stringify(ev.data)}\n\n`);
}
