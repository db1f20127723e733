/**
 * A reference encoder of the chunk events of agent output, for tests only: SSE `agent_output` /
 * `agent_output.replay` (spec 4.7, data object of spec part 2) and the WebSocket `output` message
 * (spec 4.18), built from one OutputEvent (reference-output-event.ts) per chunk. The server
 * encodes with actors/protocol/chunk-events.ts (live, on the main thread) and, for replays, with
 * its tail in the shard (actors/replay/command-replay.ts); tests check that their bytes are
 * exactly this encoder's. This was the actors' encoder before the one-crossing change.
 *
 * The frames are assembled straight into one exact-size buffer: the part that is constant per
 * (agent, command, stream) is serialized once (fast-json-stringify) and cached as bytes; per
 * chunk only the timestamp, the base64 (whose alphabet never needs JSON escaping) and the
 * JSON-escaped text are written after it. This halves the cost of building the frame from one
 * big concatenated string.
 *
 * Every agent_output event has `id: <clock>-<seq>` (output-cursor.ts). The WS `output` message
 * adds two fields to the spec's: `seq` (the command's seq) and `cursor` (the same `<clock>-<seq>`
 * as the SSE id), so WS clients can resume and detect gaps too.
 */
import fastJson from 'fast-json-stringify';
import { AGENT_OUTPUT_SCHEMA } from '../../actors/protocol/output-events.js';
import type { OutputEvent } from './reference-output-event.js';

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
      const obj = outputHeadJson({
        schema: AGENT_OUTPUT_SCHEMA,
        event_type: eventType,
        agent_id: ev.agentId,
        command_id: ev.commandId,
        stream: ev.stream,
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
