/**
 * The chunk events of agent output: SSE `agent_output` / `agent_output.replay` (spec 4.7, data
 * object of spec part 2) and the WebSocket `output` message (spec 4.18), encoded from one
 * {@link ChunkFacts} — what crosses from the agent actor to the main thread once per chunk
 * (kFrameCommandOutput, agent-frames.ts). The encoding is a pure function of the facts, so the
 * main thread's fanout encodes a live event, once for all subscribers and only when someone
 * subscribes, and the agent actor encodes the same chunk for a replay, byte for byte the same.
 *
 * A frame is assembled from a head that is constant per (kind, agent, command, stream),
 * serialized once with fast-json-stringify and cached as bytes, and a per-chunk tail: the
 * timestamp, the base64 (whose alphabet never needs JSON escaping) and the JSON-escaped text
 * (live-text.ts). Every agent_output event has `id: <clock>-<seq>` (output-cursor.ts). The WS
 * `output` message adds two fields to the spec's: `seq` (the command's seq) and `cursor` (the
 * same `<clock>-<seq>` as the SSE id), so WS clients can resume and detect gaps too.
 */
import fastJson from 'fast-json-stringify';
import type { OutputStreamName } from './agent-frames.js';
import { maxJsonTextBytes, writeJsonText } from './live-text.js';
import { formatOutputCursor } from './output-cursor.js';
import { AGENT_OUTPUT_SCHEMA } from './output-events.js';

/** One accepted chunk as every encoding of it needs it. `bytes` may be a view valid only during the call. */
export interface ChunkFacts {
  readonly agentId: string;
  readonly commandId: string;
  readonly stream: OutputStreamName;
  readonly seq: number;
  /** Per-agent clock (output-cursor.ts). */
  readonly clock: number;
  readonly timestampMs: number;
  readonly eof: boolean;
  /** What the stream's decoder held before this chunk (0–3 bytes, live-text.ts heldAfter). */
  readonly carry: Uint8Array;
  readonly bytes: Uint8Array;
}

type Json = (doc: unknown) => string;
const str = { type: 'string' } as const;

const outputHeadJson = fastJson({
  type: 'object',
  properties: { schema: str, event_type: str, agent_id: str, command_id: str, stream: str },
  required: ['schema', 'event_type', 'agent_id', 'command_id', 'stream'],
}) as Json;

const wsOutputHeadJson = fastJson({
  type: 'object',
  properties: { type: str, agent_id: str, stream_id: str, stream_type: str },
  required: ['type', 'agent_id', 'stream_id', 'stream_type'],
}) as Json;

export type ChunkHeadKind = 'sse' | 'replay' | 'ws';

/** Cached constant frame heads, keyed by (kind, agent, command, stream); cleared when it grows past this. */
const kMaxCachedHeads = 4096;
const heads = new Map<string, Buffer>();

/**
 * The bytes every frame of this (kind, agent, command, stream) starts with after its id line:
 * `event: agent_output[.replay]\ndata: {…,"timestamp_ms":` for SSE, `{…,"data":"` for WS.
 */
export function chunkHead(kind: ChunkHeadKind, agentId: string, commandId: string, stream: OutputStreamName): Buffer {
  const key = `${kind}\u0000${agentId}\u0000${commandId}\u0000${stream}`;
  let h = heads.get(key);
  if (h === undefined) {
    let text: string;
    if (kind === 'ws') {
      const obj = wsOutputHeadJson({ type: 'output', agent_id: agentId, stream_id: commandId, stream_type: stream });
      text = `${obj.slice(0, -1)},"data":"`;
    } else {
      const eventType = kind === 'replay' ? 'agent_output.replay' : 'agent_output';
      const obj = outputHeadJson({
        schema: AGENT_OUTPUT_SCHEMA,
        event_type: eventType,
        agent_id: agentId,
        command_id: commandId,
        stream,
      });
      text = `event: ${eventType}\ndata: ${obj.slice(0, -1)},"timestamp_ms":`;
    }
    if (heads.size >= kMaxCachedHeads) heads.clear();
    h = Buffer.from(text, 'utf8');
    heads.set(key, h);
  }
  return h;
}

/** Integer field text (truncated like fast-json-stringify does; a non-finite value from a bad peer is 0). */
function intText(n: number): string {
  return Number.isFinite(n) ? String(Math.trunc(n)) : '0';
}

/** Base64 of the chunk's bytes (computed once when a chunk goes to SSE and WS alike). */
export function chunkBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/** Where frames are assembled before they are copied out at their exact size. */
let scratch: Buffer = Buffer.allocUnsafeSlow(64 * 1024);

function take(bytes: number): Buffer {
  if (scratch.byteLength < bytes) scratch = Buffer.allocUnsafeSlow(Math.max(bytes, scratch.byteLength * 2));
  return scratch;
}

/** An exact-size copy that owns its memory (not a slice of Buffer's pool, which queued frames would pin). */
function exact(from: Buffer, end: number): Uint8Array {
  const out = Buffer.allocUnsafeSlow(end);
  from.copy(out, 0, 0, end);
  return out;
}

/** Writes the SSE tail `<ts>,"data_base64":"<b64>","text":<json>}\n\n` at `o`; returns the offset after it. */
function writeTail(out: Buffer, o: number, f: ChunkFacts, b64: string): number {
  o += out.write(intText(f.timestampMs), o, 'latin1');
  o += out.write(',"data_base64":"', o, 'latin1');
  o += out.write(b64, o, 'latin1');
  o += out.write('","text":', o, 'latin1');
  o = writeJsonText(out, o, f.carry, f.bytes, f.eof);
  o += out.write('}\n\n', o, 'latin1');
  return o;
}

function tailBound(f: ChunkFacts, b64: string): number {
  return 24 + 16 + b64.length + 9 + maxJsonTextBytes(f.carry.byteLength + f.bytes.byteLength) + 3;
}

/**
 * The chunk's SSE tail alone (from after `"timestamp_ms":` to the blank line): what a replay
 * puts after `id: <cursor>\n` and the cached `agent_output.replay` head.
 */
export function encodeChunkTail(f: ChunkFacts, b64: string = chunkBase64(f.bytes)): Uint8Array {
  const out = take(tailBound(f, b64));
  return exact(out, writeTail(out, 0, f, b64));
}

/** `id: <clock>-<seq>\nevent: agent_output[.replay]\ndata: <chunk object>\n\n`. */
export function encodeChunkSse(f: ChunkFacts, b64: string = chunkBase64(f.bytes), replay = false): Uint8Array {
  const cursor = formatOutputCursor(f.clock, f.seq);
  const h = chunkHead(replay ? 'replay' : 'sse', f.agentId, f.commandId, f.stream);
  const out = take(5 + cursor.length + h.byteLength + tailBound(f, b64));
  let o = out.write('id: ', 0, 'latin1');
  o += out.write(cursor, o, 'latin1');
  o += out.write('\n', o, 'latin1');
  o += h.copy(out, o);
  return exact(out, writeTail(out, o, f, b64));
}

/** WS `output` message (spec 4.18, plus seq and cursor). */
export function encodeChunkWs(f: ChunkFacts, b64: string = chunkBase64(f.bytes)): Uint8Array {
  const h = chunkHead('ws', f.agentId, f.commandId, f.stream);
  const tail = `","timestamp":${intText(f.timestampMs)},"seq":${intText(f.seq)},"cursor":"${formatOutputCursor(f.clock, f.seq)}"}`;
  const out = Buffer.allocUnsafeSlow(h.byteLength + b64.length + tail.length);
  let o = h.copy(out, 0);
  o += out.write(b64, o, 'latin1');
  out.write(tail, o, 'latin1');
  return out;
}
