/**
 * Agent-output frames, encoded once in the actor and written as the same bytes to every
 * subscriber: SSE `agent_output` / `agent_output.replay` / `agent_output.error` events (spec 4.7,
 * data object of spec part 2) and the WebSocket `output`, `metrics` and `agent_status` messages
 * (spec 4.18). Serializers are compiled once with fast-json-stringify at module load; base64 and
 * the UTF-8 text are computed once per chunk (OutputEvent, output-event.ts), shared by SSE and WS.
 *
 * The hot frames (agent_output and WS output) are assembled straight into one exact-size buffer:
 * the part that is constant per (agent, command, stream) is serialized once (fast-json-stringify)
 * and cached as bytes; per chunk only the timestamp, the base64 (whose alphabet never needs JSON
 * escaping) and the JSON-escaped text are written after it. This halves the cost of building
 * the frame from one big concatenated string.
 *
 * Every agent_output event has `id: <clock>-<seq>` (cursor.ts). `agent_output.error` data:
 *
 * | code | fields | id |
 * |---|---|---|
 * | `output_gap` | agent_id, command_id, from_seq, to_seq, reason (`evicted` \| `agent_dropped`), lost_bytes?, cursor | the gap's cursor, so a resume does not report it again |
 * | `slow_subscriber` | cursor (last event written to this subscriber; resume with it as Last-Event-ID), max_queued_bytes | none |
 * | `stream_end` | agent_id?, command_id?, reason (`command_finished` \| `command_expired` \| `server_stopping`), exit_code? | none |
 *
 * All of them also carry `schema`, `event_type` (`agent_output.error`), `code` and `message`.
 * The WS `output` message adds two fields to the spec's: `seq` (the command's seq) and `cursor`
 * (the same `<clock>-<seq>` as the SSE id), so WS clients can resume and detect gaps too.
 */
import fastJson from 'fast-json-stringify';
import { formatOutputCursor } from '../protocol/output-cursor.js';
import type { OutputEvent } from './output-event.js';

/** The spec's payload schema identifier of agent-output data objects. */
export const AGENT_OUTPUT_SCHEMA = 'svc.agent_output.v1';

type Json = (doc: unknown) => string;
const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;

const outputHeadJson = fastJson({
  type: 'object',
  properties: { schema: str, event_type: str, agent_id: str, command_id: str, stream: str },
  required: ['schema', 'event_type', 'agent_id', 'command_id', 'stream'],
}) as Json;

const errorJson = fastJson({
  type: 'object',
  properties: {
    schema: str,
    event_type: str,
    code: str,
    message: str,
    agent_id: str,
    command_id: str,
    from_seq: int,
    to_seq: int,
    reason: str,
    lost_bytes: int,
    cursor: str,
    max_queued_bytes: int,
    exit_code: int,
  },
  required: ['schema', 'event_type', 'code', 'message'],
}) as Json;

const wsOutputHeadJson = fastJson({
  type: 'object',
  properties: { type: str, agent_id: str, stream_id: str, stream_type: str },
  required: ['type', 'agent_id', 'stream_id', 'stream_type'],
}) as Json;

const wsMetricsJson = fastJson({
  type: 'object',
  properties: {
    type: str,
    agent_id: str,
    cpu_percent: { type: 'number' },
    memory_used_bytes: int,
    memory_total_bytes: int,
    disk_used_bytes: int,
    disk_total_bytes: int,
    load_avg: { type: 'array', items: { type: 'number' } },
    timestamp: int,
  },
  required: ['type', 'agent_id', 'cpu_percent', 'memory_used_bytes', 'memory_total_bytes', 'disk_used_bytes', 'disk_total_bytes', 'load_avg', 'timestamp'],
}) as Json;

const wsStatusJson = fastJson({
  type: 'object',
  properties: { type: str, agent_id: str, status: str, timestamp: int },
  required: ['type', 'agent_id', 'status', 'timestamp'],
}) as Json;

const utf8 = new TextEncoder();

/** Exact-size bytes (not a slice of Buffer's shared pool, which queued frames would pin). */
function bytesOf(text: string): Uint8Array {
  return utf8.encode(text);
}

/** SSE ids and event names never contain line breaks; ids from agents are flattened defensively. */
function sseLine(field: string, value: string): string {
  return `${field}: ${value.replace(/[\r\n]/g, ' ')}\n`;
}

/** Cached constant frame heads, keyed by (kind, agent, command, stream); cleared when it grows past this. */
const kMaxCachedHeads = 4096;
const heads = new Map<string, Buffer>();

/** The bytes every frame of this (kind, agent, command, stream) starts with, serialized once. */
function head(kind: 'sse' | 'replay' | 'ws', ev: OutputEvent): Buffer {
  const key = `${kind}\u0000${ev.agentId}\u0000${ev.commandId}\u0000${ev.stream}`;
  let h = heads.get(key);
  if (h === undefined) {
    let text: string;
    if (kind === 'ws') {
      const obj = wsOutputHeadJson({ type: 'output', agent_id: ev.agentId, stream_id: ev.commandId, stream_type: ev.stream });
      text = `${obj.slice(0, -1)},"data":"`;
    } else {
      const eventType = kind === 'replay' ? 'agent_output.replay' : 'agent_output';
      const obj = outputHeadJson({ schema: AGENT_OUTPUT_SCHEMA, event_type: eventType, agent_id: ev.agentId, command_id: ev.commandId, stream: ev.stream });
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

/** `id: <cursor>\nevent: agent_output[.replay]\ndata: <chunk object>\n\n`. */
export function encodeOutputSse(ev: OutputEvent, replay = false): Uint8Array {
  const h = head(replay ? 'replay' : 'sse', ev);
  const ts = intText(ev.timestampMs);
  const text = JSON.stringify(ev.text);
  const textBytes = Buffer.byteLength(text, 'utf8');
  // id: <cursor>\n <head> <ts> ,"data_base64":" <b64> ","text": <text> }\n\n
  const len = 4 + ev.cursor.length + 1 + h.byteLength + ts.length + 16 + ev.dataBase64.length + 9 + textBytes + 3;
  const out = Buffer.allocUnsafeSlow(len);
  let o = out.write('id: ', 0, 'latin1');
  o += out.write(ev.cursor, o, 'latin1');
  o += out.write('\n', o, 'latin1');
  out.set(h, o);
  o += h.byteLength;
  o += out.write(ts, o, 'latin1');
  o += out.write(',"data_base64":"', o, 'latin1');
  o += out.write(ev.dataBase64, o, 'latin1');
  o += out.write('","text":', o, 'latin1');
  o += out.write(text, o, 'utf8');
  o += out.write('}\n\n', o, 'latin1');
  return o === len ? out : out.subarray(0, o);
}

/** WS `output` message (spec 4.18, plus seq and cursor). */
export function encodeOutputWs(ev: OutputEvent): Uint8Array {
  const h = head('ws', ev);
  const tail = `","timestamp":${intText(ev.timestampMs)},"seq":${intText(ev.seq)},"cursor":"${ev.cursor}"}`;
  const len = h.byteLength + ev.dataBase64.length + tail.length;
  const out = Buffer.allocUnsafeSlow(len);
  out.set(h, 0);
  let o = h.byteLength;
  o += out.write(ev.dataBase64, o, 'latin1');
  o += out.write(tail, o, 'latin1');
  return o === len ? out : out.subarray(0, o);
}

/** An output gap for one command: `agent_output.error` with code output_gap and the gap's cursor as id. */
export function encodeGapSse(gap: {
  agentId: string;
  commandId: string;
  fromSeq: number;
  toSeq: number;
  reason: 'evicted' | 'agent_dropped';
  lostBytes?: number;
  clock: number;
}): Uint8Array {
  const cursor = formatOutputCursor(gap.clock, gap.toSeq);
  const what = gap.reason === 'evicted' ? 'is no longer buffered' : 'was dropped by the agent';
  const data = errorJson({
    schema: AGENT_OUTPUT_SCHEMA,
    event_type: 'agent_output.error',
    code: 'output_gap',
    message: `output seq ${gap.fromSeq}-${gap.toSeq} of command ${gap.commandId} ${what}`,
    agent_id: gap.agentId,
    command_id: gap.commandId,
    from_seq: gap.fromSeq,
    to_seq: gap.toSeq,
    reason: gap.reason,
    lost_bytes: gap.lostBytes,
    cursor,
  });
  return bytesOf(`${sseLine('id', cursor)}event: agent_output.error\ndata: ${data}\n\n`);
}

/** The one frame a subscriber gets before it is cut off for falling behind (no id). */
export function encodeSlowSubscriberSse(cursor: string | undefined, maxQueuedBytes: number): Uint8Array {
  const data = errorJson({
    schema: AGENT_OUTPUT_SCHEMA,
    event_type: 'agent_output.error',
    code: 'slow_subscriber',
    message: `the subscriber fell more than ${maxQueuedBytes} bytes behind and was disconnected; reconnect with Last-Event-ID to resume`,
    cursor,
    max_queued_bytes: maxQueuedBytes,
  });
  return bytesOf(`event: agent_output.error\ndata: ${data}\n\n`);
}

/** The stream ends (no id): the command finished, its output expired, or the server stops. */
export function encodeStreamEndSse(end: {
  reason: 'command_finished' | 'command_expired' | 'server_stopping';
  agentId?: string;
  commandId?: string;
  exitCode?: number;
}): Uint8Array {
  const message =
    end.reason === 'command_finished'
      ? `command ${end.commandId ?? ''} finished${end.exitCode === undefined ? '' : ` with exit code ${end.exitCode}`}`
      : end.reason === 'command_expired'
        ? `command ${end.commandId ?? ''} is unknown or its output has expired`
        : 'the server is stopping';
  const data = errorJson({
    schema: AGENT_OUTPUT_SCHEMA,
    event_type: 'agent_output.error',
    code: 'stream_end',
    message,
    agent_id: end.agentId,
    command_id: end.commandId,
    reason: end.reason,
    exit_code: end.exitCode,
  });
  return bytesOf(`event: agent_output.error\ndata: ${data}\n\n`);
}

/** WS `metrics` message (spec 4.18). */
export function encodeMetricsWs(m: {
  agentId: string;
  cpuPercent: number;
  memoryUsedBytes: number;
  memoryTotalBytes: number;
  diskUsedBytes: number;
  diskTotalBytes: number;
  loadAvg: readonly number[];
  timestampMs: number;
}): Uint8Array {
  return bytesOf(
    wsMetricsJson({
      type: 'metrics',
      agent_id: m.agentId,
      cpu_percent: m.cpuPercent,
      memory_used_bytes: m.memoryUsedBytes,
      memory_total_bytes: m.memoryTotalBytes,
      disk_used_bytes: m.diskUsedBytes,
      disk_total_bytes: m.diskTotalBytes,
      load_avg: m.loadAvg,
      timestamp: m.timestampMs,
    }),
  );
}

/** Agent status values of spec part 3. */
export type AgentStatusName = 'Starting' | 'Ready' | 'Busy' | 'Error' | 'ShuttingDown' | 'Stale' | 'Disconnected';

/** WS `agent_status` message (spec 4.18). */
export function encodeAgentStatusWs(s: { agentId: string; status: AgentStatusName; timestampMs: number }): Uint8Array {
  return bytesOf(wsStatusJson({ type: 'agent_status', agent_id: s.agentId, status: s.status, timestamp: s.timestampMs }));
}
