/**
 * Frames from the per-command replay state in the agent actors to the main thread's fanout
 * (kinds 34–37, listed in frame-kinds.ts). Chunks are not among them: a chunk crosses once, as
 * kFrameCommandOutput (agent-frames.ts), and the fanout encodes it (chunk-events.ts).
 *
 *   34 kFrameOutputPublish  key `<agent_id>\0<command_id>`; one encoded SSE event (output_gap or
 *                           stream_end) for the agent-output topics
 *   35 kFrameChatPublish    key = chat topic (chatTopic); one chat SSE event
 *   36 kFrameOutputForget   key `<agent_id>\0<command_id>`; the command's replay state was
 *                           released (retention ran out): its output is no longer buffered
 *   37 kFrameOutputKnown    key `<agent_id>\0<command_id>`; a command was dispatched (lets the
 *                           main thread find the agent of a command_id before output arrives)
 *
 * kFrameOutputPublish payload (little-endian):
 *
 *   0        1         2              4            8
 *   ┌────────┬─────────┬──────────────┬────────────┬──────────────┬─────┐
 *   │u8 flags│u8 stream│u16 cursorLen │u32 sseLen  │ cursor, pad 8│ SSE │
 *   └────────┴─────────┴──────────────┴────────────┴──────────────┴─────┘
 *
 * stream: 1 stdout, 2 stderr, 3 log, 0 all streams (gaps and ends concern every stream).
 * flags: kPublishEnd: the command's output ended: subscribers scoped to this command are closed
 * after this frame; kPublishGap: the SSE event reports an output gap (counted).
 *
 * kFrameChatPublish payload: [u8 flags (kChatTerminal)][u8 0][u16 cursorLen][u32 frameLen]
 * [cursor, pad 8][SSE event]. A terminal event (done, error) closes the topic's subscribers.
 */
import type { OutputStreamName } from './agent-frames.js';

export { PublishFrameKind } from './frame-kinds.js';

/** kFrameOutputPublish flags. */
export const kPublishEnd = 1;
export const kPublishGap = 2;
/** kFrameChatPublish flags. */
export const kChatTerminal = 1;

export const kPublishHeaderBytes = 8;
const kChatHeaderBytes = 8;

const STREAM_CODES: Record<OutputStreamName, number> = { stdout: 1, stderr: 2, log: 3 };
const STREAM_NAMES: readonly (OutputStreamName | undefined)[] = [undefined, 'stdout', 'stderr', 'log'];

/** The stream code of a publish frame (0 = every stream). */
export function streamCode(stream: OutputStreamName | undefined): number {
  return stream === undefined ? 0 : STREAM_CODES[stream];
}

/** `<agent_id>\0<command_id>`: agent ids never contain NUL (they travel in gRPC metadata). */
export function commandKey(agentId: string, commandId: string): string {
  return `${agentId}\u0000${commandId}`;
}

/** Splits a commandKey; null when it has no separator. */
export function parseCommandKey(key: string): { agentId: string; commandId: string } | null {
  const at = key.indexOf('\u0000');
  if (at < 0) return null;
  return { agentId: key.slice(0, at), commandId: key.slice(at + 1) };
}

/** The SSE topic of one (command, session) chat projection. */
export function chatTopic(commandId: string, sessionId: string): string {
  return `chat\u0000${commandId}\u0000${sessionId}`;
}

function align8(n: number): number {
  return (n + 7) & ~7;
}

/** A kFrameOutputPublish payload holding one SSE event. */
export function encodeSsePublish(flags: number, stream: number, cursor: string, sse: Uint8Array): Uint8Array {
  const at = kPublishHeaderBytes + align8(cursor.length);
  const out = new Uint8Array(at + sse.byteLength);
  const view = new DataView(out.buffer, 0, kPublishHeaderBytes);
  out[0] = flags;
  out[1] = stream;
  view.setUint16(2, cursor.length, true);
  view.setUint32(4, sse.byteLength, true);
  for (let i = 0; i < cursor.length; i++) out[kPublishHeaderBytes + i] = cursor.charCodeAt(i);
  out.set(sse, at);
  return out;
}

/** A decoded kFrameOutputPublish; sse is a view into the payload (valid as long as it is). */
export interface OutputPublish {
  flags: number;
  /** undefined = every stream. */
  stream: OutputStreamName | undefined;
  /** undefined when the event has no id (stream_end). */
  cursor: string | undefined;
  sse: Uint8Array;
}

/** Decodes a kFrameOutputPublish payload; null when it is malformed. */
export function decodeOutputPublish(payload: Uint8Array): OutputPublish | null {
  if (payload.byteLength < kPublishHeaderBytes) return null;
  const view = new DataView(payload.buffer, payload.byteOffset, kPublishHeaderBytes);
  const cursorLength = view.getUint16(2, true);
  const sseBytes = view.getUint32(4, true);
  const sseAt = kPublishHeaderBytes + align8(cursorLength);
  if (sseAt + sseBytes > payload.byteLength || (payload[1] ?? 0) > 3) return null;
  return {
    flags: payload[0] ?? 0,
    stream: STREAM_NAMES[payload[1] ?? 0],
    cursor: cursorLength === 0 ? undefined : latin1(payload, kPublishHeaderBytes, kPublishHeaderBytes + cursorLength),
    sse: payload.subarray(sseAt, sseAt + sseBytes),
  };
}

/** A kFrameChatPublish payload. */
export function encodeChatPublish(terminal: boolean, cursor: string, frame: Uint8Array): Uint8Array {
  const cursorBytes = Buffer.byteLength(cursor, 'utf8');
  const at = kChatHeaderBytes + align8(cursorBytes);
  const out = new Uint8Array(at + frame.byteLength);
  const view = new DataView(out.buffer, 0, kChatHeaderBytes);
  out[0] = terminal ? kChatTerminal : 0;
  view.setUint16(2, cursorBytes, true);
  view.setUint32(4, frame.byteLength, true);
  Buffer.from(out.buffer, kChatHeaderBytes, cursorBytes).write(cursor, 'utf8');
  out.set(frame, at);
  return out;
}

/** Decodes a kFrameChatPublish payload; null when malformed. `frame` is a view. */
export function decodeChatPublish(payload: Uint8Array): { terminal: boolean; cursor: string; frame: Uint8Array } | null {
  if (payload.byteLength < kChatHeaderBytes) return null;
  const view = new DataView(payload.buffer, payload.byteOffset, kChatHeaderBytes);
  const cursorBytes = view.getUint16(2, true);
  const frameBytes = view.getUint32(4, true);
  const at = kChatHeaderBytes + align8(cursorBytes);
  if (at + frameBytes > payload.byteLength) return null;
  const cursor = Buffer.from(payload.buffer, payload.byteOffset + kChatHeaderBytes, cursorBytes).toString('utf8');
  return { terminal: ((payload[0] ?? 0) & kChatTerminal) !== 0, cursor, frame: payload.subarray(at, at + frameBytes) };
}

function latin1(bytes: Uint8Array, from: number, to: number): string {
  let s = '';
  for (let i = from; i < to; i++) s += String.fromCharCode(bytes[i] ?? 0);
  return s;
}
