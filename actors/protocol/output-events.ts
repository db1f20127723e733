/**
 * The agent-output events built from a message rather than from a chunk, each encoded once:
 * `agent_output.error` SSE events (spec 4.7, data object of spec part 2) and the WebSocket
 * `metrics` and `agent_status` messages (spec 4.18). The main thread writes the slow_subscriber
 * and stream_end events and the WS messages itself; the agent actors write gaps and ends into
 * their replay rings. The chunk events (`agent_output`, `agent_output.replay`, WS `output`) are
 * built by chunk-events.ts (live on the main thread, replayed in the shard). Serializers are compiled once with
 * fast-json-stringify at module load.
 *
 * `agent_output.error` data:
 *
 * | code | fields | id |
 * |---|---|---|
 * | `output_gap` | agent_id, command_id, from_seq, to_seq, reason (`evicted` \| `agent_dropped`), lost_bytes?, cursor | the gap's cursor, so a resume does not report it again |
 * | `slow_subscriber` | cursor (last event written to this subscriber; resume with it as Last-Event-ID), max_queued_bytes | none |
 * | `stream_end` | agent_id?, command_id?, reason (`command_finished` \| `command_expired` \| `server_stopping`), exit_code? | none |
 *
 * All of them also carry `schema`, `event_type` (`agent_output.error`), `code` and `message`.
 */
import fastJson from 'fast-json-stringify';
import { formatOutputCursor } from './output-cursor.js';

/** The spec's payload schema identifier of agent-output data objects. */
export const AGENT_OUTPUT_SCHEMA = 'svc.agent_output.v1';

type Json = (doc: unknown) => string;
const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;

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
  required: [
    'type',
    'agent_id',
    'cpu_percent',
    'memory_used_bytes',
    'memory_total_bytes',
    'disk_used_bytes',
    'disk_total_bytes',
    'load_avg',
    'timestamp',
  ],
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
