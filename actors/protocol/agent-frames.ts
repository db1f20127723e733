/**
 * The contract between the main thread (src/agent-link) and the agent-connection actors: the actor's
 * id, spawn argument and call arguments, and the payloads of its frames (kinds 16–26 and 48–50;
 * direction, key and payload of each in frame-kinds.ts). The frame key is the actor id on frames
 * to an actor (`agent:<agent_id>`) and the agent id or command id on frames from one.
 *
 * connId numbers the streams of one agent (main thread, from 1): a frame for a stream that has
 * since been replaced is dropped by the main thread, so a RegistrationAck meant for an old
 * stream never reaches a new one. Inbound frames carry no connId: Attach/Detach delimit them,
 * and frames for one actor arrive in send order.
 */
import type { AgentMetrics as AgentMetricsView, AgentSystemInfo as AgentSystemInfoView } from '../../src/wire/agents.js';

export { AgentFrameKind } from './frame-kinds.js';
export { decodeJson, encodeJson } from './frames.js';

/** Actor type name of the agent connection actor. */
export const AGENT_ACTOR_TYPE = 'agent-connection';

/** The actor id of agent `agentId`. Other actors placed with the agent use `agent:<id>/<name>` (same shard, shard-hash.ts). */
export function agentActorId(agentId: string): string {
  return `agent:${agentId}`;
}

/** The agent id of an `agent:<id>` actor id, or null for other actors. */
export function agentIdOfActor(actorId: string): string | null {
  if (!actorId.startsWith('agent:')) return null;
  const rest = actorId.slice('agent:'.length);
  return rest.length === 0 || rest.includes('/') ? null : rest;
}

/** Spawn argument of an agent-connection actor (structured-cloned into the shard). */
export interface AgentActorInit {
  readonly agentId: string;
  /** Sent in RegistrationAck.heartbeat_interval_seconds. */
  readonly heartbeatIntervalSeconds: number;
  /** Stale when the last heartbeat is older than this (ms). */
  readonly staleAfterMs: number;
  /** A Disconnected agent is removed this long after its stream ended (ms). */
  readonly retentionMs: number;
  /** Finished commands remembered per agent for de-duplication of resends. Default 1024. */
  readonly maxFinishedCommands?: number;
}

/** Arguments of the `runCommand` call (CommandRequest fields, camelCase). */
export interface RunCommandArgs {
  commandId: string;
  command: string;
  args?: string[];
  workingDir?: string;
  env?: Record<string, string>;
  /** 0 or absent: none. */
  timeoutSeconds?: number;
  runAs?: string;
  allocatePty?: boolean;
  ptyCols?: number;
  ptyRows?: number;
  ptyTerm?: string;
  sessionId?: string;
  sessionName?: string;
  /** Who asked (events and stats). Default 'server'. */
  source?: 'exec' | 'server';
}

/** kFrameAgentAttach payload. */
export interface AttachInfo {
  readonly connId: number;
  /** The verified certificate's instance id (= x-agent-instance-id). */
  readonly instanceId: string;
  readonly traceId: string | null;
  /** Peer address as grpc-js reports it. */
  readonly peer: string;
  /** Unix ms. */
  readonly connectedAtMs: number;
}

/** kFrameAgentDetach payload. */
export interface DetachInfo {
  readonly connId: number;
  /** Why the stream ended (`client ended the stream`, `cancelled`, `superseded`, ...). */
  readonly reason: string;
}

/** The spec's Agent.metrics and Agent.system_info: declared with the API's wire shapes (src/wire/agents.ts). */
export type { AgentMetricsView, AgentSystemInfoView };

/** kFrameAgentSnapshot payload: the spec's Agent fields plus ours (not listed by GET /api/v1/agents). */
export interface AgentSnapshot {
  id: string;
  hostname: string;
  ip_address: string;
  status: string;
  /** Unix ms of the current (or last) stream. */
  connected_at: number;
  /** Unix ms of the last heartbeat (the registration time until the first heartbeat). */
  last_heartbeat: number;
  metrics?: AgentMetricsView;
  system_info?: AgentSystemInfoView;
  // ours
  instance_id: string;
  profile: string;
  labels: Record<string, string>;
  agent_version: string;
  /** Commands the last heartbeat reported as running. */
  running_commands: number;
  /** Unix ms the stream ended; null while connected. */
  disconnected_at: number | null;
}

/** kFrameAgentEvent payload: a v1 event record without timestamp defaults. */
export interface AgentEventFrame {
  event_type: string;
  agent_id: string;
  vm_name: string;
  /** ISO 8601. */
  timestamp: string;
  details: Record<string, unknown>;
  trace_id: string | null;
}

/** kFrameSessionReport payload: SessionReport's sessions (camelCase, as the proto code names them). */
export interface SessionReportFrame {
  agentId: string;
  sessions: {
    commandId: string;
    sessionId: string;
    sessionName: string;
    command: string;
    pid: number;
    isPty: boolean;
    startedAtMs: number;
  }[];
  timestampMs: number;
}

/** kFrameSessionReconcileAck payload. */
export interface SessionReconcileAckFrame {
  agentId: string;
  killedSessionIds: string[];
  keptSessionIds: string[];
  failedToKill: string[];
}

/** svc_commands_by_result{result} values. */
export const COMMAND_RESULTS = ['success', 'failure', 'timeout', 'killed', 'error'] as const;
export type CommandResultLabel = (typeof COMMAND_RESULTS)[number];

/** kFrameAgentMetric payload. */
export type AgentMetricFrame =
  | { type: 'command_started' }
  | { type: 'command_finished'; result: CommandResultLabel; latency_seconds: number }
  | { type: 'message_rejected'; reason: RejectReason };

/** Why an inbound agent message was ignored or refused (svc_agent_messages_rejected_total{reason}). */
export const REJECT_REASONS = [
  'undecodable',
  'oversized',
  'unknown_payload',
  'invalid_field',
  'before_registration',
  'registration_twice',
  'identity_mismatch',
  'not_attached',
  'unknown_frame',
] as const;
export type RejectReason = (typeof REJECT_REASONS)[number];

/** kFrameCommandResult payload (CommandResult plus who asked). */
export interface CommandResultFrame {
  agent_id: string;
  command_id: string;
  exit_code: number;
  error: string;
  duration_ms: number;
  success: boolean;
  timed_out_by: string;
  last_seq: number;
  result: CommandResultLabel;
}

/** kFrameCommandGap payload: output seqs first..last of the command are lost. */
export interface CommandGapFrame {
  agent_id: string;
  command_id: string;
  first_seq: number;
  last_seq: number;
  lost_bytes: number;
  reason: string;
}

/** OutputHeader.stream values. */
export const OutputStream = { stdout: 1, stderr: 2, log: 3 } as const;
export type OutputStreamName = keyof typeof OutputStream;

/** Bytes of the header in front of kFrameCommandOutput data. */
export const kOutputHeaderBytes = 40;

/**
 * A decoded kFrameCommandOutput: one accepted chunk, the one representation of it on the main
 * thread (Exec calls, command listeners, the output fanout). `data` and `carry` are views into
 * the frame, valid only while it is.
 */
export interface OutputFrame {
  stream: number;
  eof: boolean;
  seq: number;
  offset: number;
  timestampMs: number;
  /** Per-agent clock of the chunk (its cursor is `<clock>-<seq>`); 0 when the replay state did not store it (not published). */
  clock: number;
  /** What the stream's text decoder held before this chunk (0–3 bytes; actors/protocol/live-text.ts). */
  carry: Uint8Array;
  data: Uint8Array;
}

/** What the writer needs: the frame without its data; clock and carry default to 0 and none. */
export type OutputHeader = Omit<OutputFrame, 'data' | 'clock' | 'carry'> & { clock?: number; carry?: Uint8Array };

/**
 * kFrameCommandOutput layout (little-endian), key `<agent_id>\0<command_id>` (commandKey):
 *
 *   0       1       2          3          6      7      8          16          24              32         40    40 + pad
 *   ┌───────┬───────┬──────────┬──────────┬──────┬──────┬──────────┬───────────┬───────────────┬──────────┬─────┬────────┐
 *   │ u8    │ u8    │ u8 carry │ carry    │ u8   │ zero │ f64 seq  │f64 offset │ f64 timestamp │ f64 clock│ pad │ data … │
 *   │stream │flags  │ bytes 0-3│ (3 bytes)│ pad  │      │          │           │ Unix ms       │          │ 0-7 │        │
 *   └───────┴───────┴──────────┴──────────┴──────┴──────┴──────────┴───────────┴───────────────┴──────────┴─────┴────────┘
 *
 * flags bit 0: eof. 64-bit counters are f64: exact below 2^53 (proto/README.md). `pad` (0–7)
 * zero bytes put the data at the same address modulo 8 as where the writer copied it from (a
 * chunk inside an agent message in a shard ring sits anywhere): V8 copies shared memory word by
 * word only between addresses aligned alike, and byte by byte otherwise, about 8 times slower.
 */
export function encodeOutputFrame(o: OutputHeader, data: Uint8Array): Uint8Array {
  return writeOutputFrame(new Uint8Array(kOutputHeaderBytes + data.byteLength), o, data);
}

/** Bytes of a kFrameCommandOutput payload with `dataBytes` of data after `pad` bytes of padding. */
export function outputFrameBytes(dataBytes: number, pad = 0): number {
  return kOutputHeaderBytes + pad + dataBytes;
}

/**
 * Writes the frame into `out`, which must be exactly outputFrameBytes(data.byteLength, pad)
 * long (a view of a reused buffer on the hot path); returns `out`.
 */
export function writeOutputFrame(out: Uint8Array, o: OutputHeader, data: Uint8Array, pad = 0): Uint8Array {
  const view = new DataView(out.buffer, out.byteOffset, kOutputHeaderBytes);
  const carry = o.carry ?? EMPTY_BYTES;
  if (carry.byteLength > 3) throw new RangeError(`an output carry is at most 3 bytes, got ${carry.byteLength}`);
  if (!(pad >= 0 && pad <= 7)) throw new RangeError(`an output frame's pad is 0-7 bytes, got ${pad}`);
  out.fill(0, 0, 8);
  out[0] = o.stream;
  out[1] = o.eof ? 1 : 0;
  out[2] = carry.byteLength;
  out.set(carry, 3);
  out[6] = pad;
  view.setFloat64(8, o.seq, true);
  view.setFloat64(16, o.offset, true);
  view.setFloat64(24, o.timestampMs, true);
  view.setFloat64(32, o.clock ?? 0, true);
  if (pad > 0) out.fill(0, kOutputHeaderBytes, kOutputHeaderBytes + pad);
  out.set(data, kOutputHeaderBytes + pad);
  return out;
}

/** Where the data of a kFrameCommandOutput payload starts (header and pad). */
function dataStart(payload: Uint8Array): number {
  return kOutputHeaderBytes + (payload[6]! & 7);
}

/** The data bytes of a kFrameCommandOutput payload (without header and pad); 0 for a malformed one. */
export function outputDataBytes(payload: Uint8Array): number {
  return payload.byteLength < kOutputHeaderBytes ? 0 : Math.max(0, payload.byteLength - dataStart(payload));
}

/** Decodes a kFrameCommandOutput payload; null when it is shorter than its header and pad. */
export function decodeOutputFrame(payload: Uint8Array): OutputFrame | null {
  if (payload.byteLength < kOutputHeaderBytes) return null;
  const start = dataStart(payload);
  if (payload.byteLength < start) return null;
  const view = new DataView(payload.buffer, payload.byteOffset, kOutputHeaderBytes);
  return {
    stream: payload[0]!,
    eof: (payload[1]! & 1) === 1,
    seq: view.getFloat64(8, true),
    offset: view.getFloat64(16, true),
    timestampMs: view.getFloat64(24, true),
    clock: view.getFloat64(32, true),
    carry: payload.subarray(3, 3 + Math.min(3, payload[2]!)),
    data: payload.subarray(start),
  };
}

const EMPTY_BYTES = new Uint8Array(0);

/** [u32 connId][bytes] for kFrameSendToAgent. */
export function encodeToAgent(connId: number, message: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + message.byteLength);
  new DataView(out.buffer).setUint32(0, connId, true);
  out.set(message, 4);
  return out;
}

/** [u32 connId][u8 status][UTF-8 reason] for kFrameAgentClose. */
export function encodeAgentClose(connId: number, grpcStatus: number, reason: string): Uint8Array {
  const text = textEncoder.encode(reason);
  const out = new Uint8Array(5 + text.byteLength);
  new DataView(out.buffer).setUint32(0, connId, true);
  out[4] = grpcStatus;
  out.set(text, 5);
  return out;
}

/** Splits a kFrameSendToAgent / kFrameAgentClose payload; null when shorter than its header. */
export function decodeConnPrefixed(payload: Uint8Array): { connId: number; rest: Uint8Array } | null {
  if (payload.byteLength < 4) return null;
  const connId = new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0, true);
  return { connId, rest: payload.subarray(4) };
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

/** Decodes UTF-8 text (reasons). */
export function decodeText(payload: Uint8Array): string {
  return textDecoder.decode(payload);
}
