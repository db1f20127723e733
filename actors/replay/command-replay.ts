/**
 * One command's replay state inside its agent actor (per command, in the agent's shard): the
 * ReplayRing and the live encoding of its chunks.
 *
 * Every chunk is encoded ONCE, when it arrives: its SSE `agent_output` event and its WS `output`
 * message are written into one kFrameOutputPublish payload (actors/protocol/publish-frames.ts) that the main
 * thread writes, as is, to every subscriber. The ring keeps the encoded SSE event's tail (from
 * `timestamp_ms` to the end: timestamp, base64, JSON text) instead of the raw bytes, so a replay
 * only concatenates `id: <cursor>\n` + the cached `agent_output.replay` head + the stored tail: no
 * base64, UTF-8 decoding or JSON work at replay time, and the replayed text is byte for byte the
 * live text. The ring is charged for the encoded bytes (what it really holds). The raw bytes, when
 * needed (chat projection), are decoded back from the tail's base64. A replay is one buffer, in
 * shared memory when built in a worker (see Pieces.join).
 */
import { isMainThread } from 'node:worker_threads';
import { formatOutputCursor, type OutputCursor } from '../protocol/output-cursor.js';
import { replayAgentAfter } from './agent-replay.js';
import { encodeGapSse, encodeStreamEndSse } from '../protocol/output-events.js';
import { encodeOutputSse, encodeOutputWs } from './encode.js';
import { LiveText, maxJsonTextBytes } from './live-text.js';
import type { OutputEvent } from './output-event.js';
import { encodeSsePublish, kPublishEnd, kPublishGap, publishBytes, streamCode, writePublishHeader } from '../protocol/publish-frames.js';
import type { ReplayBudget } from './replay-budget.js';
import { ReplayRing, type OutputStreamName, type ReplayChunk, type ReplayGap } from './replay-ring.js';

/** A chunk as the agent actor accepted it. `bytes` is valid only during the call. */
export interface LiveChunk {
  seq: number;
  stream: OutputStreamName;
  offset: number;
  timestampMs: number;
  eof: boolean;
  bytes: Uint8Array;
}

/** A replay as ready-to-write SSE bytes (one buffer: one copy across the thread, one socket write). */
export interface ReplayBytes {
  /** The events, concatenated. */
  bytes: Uint8Array;
  /** Events in `bytes` (chunks and gaps). */
  events: number;
  chunks: number;
  /** Id of the last event; null when there is none. */
  last: string | null;
  /** More retained output follows `last` (ask again after it). */
  more: boolean;
}

interface Heads {
  live: Buffer;
  replay: Buffer;
  ws: Buffer;
}

/** A growable buffer the frames of one actor thread are assembled in (emit copies it out). */
export class Scratch {
  #buf: Buffer = Buffer.allocUnsafeSlow(64 * 1024);

  /** A buffer of at least `bytes` (contents undefined). */
  take(bytes: number): Buffer {
    if (this.#buf.byteLength < bytes) this.#buf = Buffer.allocUnsafeSlow(Math.max(bytes, this.#buf.byteLength * 2));
    return this.#buf;
  }
}

const kTimestampField = Buffer.from(',"timestamp_ms":', 'latin1');
const kWsDataField = Buffer.from('"data":"', 'latin1');
const kProbeCursor = 'X';

/** Integer field text, as encode.ts writes it. */
function intText(n: number): string {
  return Number.isFinite(n) ? String(Math.trunc(n)) : '0';
}

/** The constant frame heads of (agent, command, stream), cut out of frames encode.ts builds. */
function headsOf(agentId: string, commandId: string, stream: OutputStreamName): Heads {
  const probe: OutputEvent = {
    agentId,
    commandId,
    stream,
    timestampMs: 0,
    seq: 0,
    clock: 0,
    cursor: kProbeCursor,
    dataBase64: '',
    text: '',
  };
  const idLine = 4 + kProbeCursor.length + 1;
  const cut = (frame: Uint8Array): Buffer => {
    const b = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
    return Buffer.from(b.subarray(idLine, b.indexOf(kTimestampField) + kTimestampField.byteLength));
  };
  const ws = Buffer.from(encodeOutputWs(probe));
  return {
    live: cut(encodeOutputSse(probe)),
    replay: cut(encodeOutputSse(probe, true)),
    ws: Buffer.from(ws.subarray(0, ws.indexOf(kWsDataField) + kWsDataField.byteLength)),
  };
}

/** Collects frame pieces, then copies them into one exact-size buffer. */
class Pieces {
  readonly #parts: (Uint8Array | string)[] = [];
  #bytes = 0;

  /** An ASCII string (ids and cursors). */
  text(s: string): void {
    this.#parts.push(s);
    this.#bytes += s.length;
  }

  bytes(b: Uint8Array): void {
    this.#parts.push(b);
    this.#bytes += b.byteLength;
  }

  /**
   * One buffer with every piece. In a worker thread it is backed by a SharedArrayBuffer, so the
   * answer crosses to the main thread without a copy (structured clone shares SAB memory); on the
   * main thread (inline mode) a plain buffer.
   */
  join(): Uint8Array {
    const out = isMainThread ? Buffer.allocUnsafeSlow(this.#bytes) : Buffer.from(new SharedArrayBuffer(this.#bytes));
    let o = 0;
    for (const p of this.#parts) {
      if (typeof p === 'string') o += out.write(p, o, 'latin1');
      else {
        out.set(p, o);
        o += p.byteLength;
      }
    }
    return out;
  }
}

export class CommandReplay {
  readonly agentId: string;
  readonly commandId: string;
  readonly ring: ReplayRing;
  readonly #text = new LiveText();
  readonly #heads = new Map<OutputStreamName, Heads>();

  constructor(agentId: string, commandId: string, opts: { ringBytes: number; budget?: ReplayBudget }) {
    this.agentId = agentId;
    this.commandId = commandId;
    this.ring = new ReplayRing(
      commandId,
      opts.budget === undefined ? { maxBytes: opts.ringBytes } : { maxBytes: opts.ringBytes, budget: opts.budget },
    );
  }

  get finished(): boolean {
    return this.ring.finishedAtMs !== undefined;
  }

  /**
   * Stores a chunk (stamped with `clock`) and returns its kFrameOutputPublish payload, built in
   * `scratch` (valid until the scratch is used again). Null when the ring already holds the seq or
   * was released.
   */
  chunk(c: LiveChunk, clock: number, scratch: Scratch): Uint8Array | null {
    const ring = this.ring;
    if (ring.released || c.seq <= ring.lastSeq) return null;
    const heads = this.#headsFor(c.stream);
    const cursor = formatOutputCursor(clock, c.seq);
    const ts = intText(c.timestampMs);
    const b64 = Buffer.from(c.bytes.buffer, c.bytes.byteOffset, c.bytes.byteLength).toString('base64');
    const wsTail = `","timestamp":${ts},"seq":${intText(c.seq)},"cursor":"${cursor}"}`;
    const sseMax =
      4 + cursor.length + 1 + heads.live.byteLength + ts.length + 16 + b64.length + 9 + maxJsonTextBytes(c.bytes.byteLength) + 3;
    const wsBytes = heads.ws.byteLength + b64.length + wsTail.length;
    const out = scratch.take(publishBytes(cursor.length, sseMax, wsBytes));
    const sseAt = publishBytes(cursor.length, 0, 0);
    // SSE: id: <cursor>\n <live head> <tail: ts ,"data_base64":" b64 ","text": json }\n\n>
    let o = sseAt + out.write('id: ', sseAt, 'latin1');
    o += out.write(cursor, o, 'latin1');
    o += out.write('\n', o, 'latin1');
    o += heads.live.copy(out, o);
    const tailAt = o;
    o += out.write(ts, o, 'latin1');
    o += out.write(',"data_base64":"', o, 'latin1');
    o += out.write(b64, o, 'latin1');
    o += out.write('","text":', o, 'latin1');
    o = this.#text.write(out, o, c.stream, c.offset, c.bytes, c.eof);
    o += out.write('}\n\n', o, 'latin1');
    const sseEnd = o;
    // WS: <ws head> b64 <ws tail>
    o += heads.ws.copy(out, o);
    o += out.write(b64, o, 'latin1');
    o += out.write(wsTail, o, 'latin1');
    writePublishHeader(out, 0, streamCode(c.stream), cursor, sseEnd - sseAt, o - sseEnd);
    ring.append({
      seq: c.seq,
      stream: c.stream,
      offset: c.offset,
      timestampMs: c.timestampMs,
      eof: c.eof,
      clock,
      bytes: out.subarray(tailAt, sseEnd),
    });
    return out.subarray(0, o);
  }

  /** Records lost seqs first..last; returns the output_gap publish payload, or null for nothing new. */
  gap(g: { firstSeq: number; lastSeq: number; lostBytes: number; timestampMs: number }, clock: number): Uint8Array | null {
    const from = this.ring.lastSeq + 1;
    const r = this.ring.appendGap({ firstSeq: g.firstSeq, lastSeq: g.lastSeq, lostBytes: g.lostBytes, timestampMs: g.timestampMs, clock });
    if (r !== 'stored') return null;
    const exact = g.firstSeq === from;
    const gap = {
      agentId: this.agentId,
      commandId: this.commandId,
      fromSeq: from,
      toSeq: g.lastSeq,
      reason: 'agent_dropped' as const,
      clock,
    };
    const frame = encodeGapSse(exact && g.lostBytes > 0 ? { ...gap, lostBytes: g.lostBytes } : gap);
    return encodeSsePublish(kPublishGap, 0, formatOutputCursor(clock, g.lastSeq), frame);
  }

  /** The command ended: marks the ring finished and returns the stream_end publish payload. */
  end(exitCode: number, nowMs: number): Uint8Array {
    this.ring.finish(exitCode, nowMs);
    return encodeSsePublish(kPublishEnd, 0, '', this.endFrame());
  }

  /** The stream_end event of this command (finished, with its exit code). */
  endFrame(): Uint8Array {
    const exitCode = this.ring.exitCode;
    const end = { reason: 'command_finished' as const, agentId: this.agentId, commandId: this.commandId };
    return encodeStreamEndSse(exitCode === undefined ? end : { ...end, exitCode });
  }

  /**
   * Replay as `agent_output.replay` events: after `afterSeq` (a resume: everything retained after
   * it, `limit` chunks per call), or when it is undefined the newest `limit` chunks. Seqs that
   * cannot be delivered come as `agent_output.error` output_gap events in their place.
   */
  replay(req: { afterSeq?: number | undefined; limit: number; stream?: OutputStreamName | undefined }): ReplayBytes {
    const ring = this.ring;
    const pieces = new Pieces();
    const out: ReplayBytes = { bytes: new Uint8Array(0), events: 0, chunks: 0, last: null, more: false };
    let after = req.afterSeq ?? ring.tailAfterSeq(req.limit, req.stream);
    for (;;) {
      const page = ring.replayFrom(after, req.limit - out.chunks, req.stream);
      if (page.gap !== undefined) out.last = this.#gapPiece(pieces, page.gap);
      for (const chunk of page.chunks) out.last = this.chunkPiece(pieces, chunk);
      out.events += page.chunks.length + (page.gap === undefined ? 0 : 1);
      out.chunks += page.chunks.length;
      after = page.next.seq;
      if (!page.more) break;
      if (out.chunks >= req.limit) {
        out.more = true;
        break;
      }
    }
    out.bytes = pieces.join();
    return out;
  }

  /** Appends one stored chunk as an `agent_output.replay` event; returns its id. */
  chunkPiece(pieces: Pieces, chunk: ReplayChunk): string {
    const cursor = formatOutputCursor(chunk.clock, chunk.seq);
    pieces.text(`id: ${cursor}\n`);
    pieces.bytes(this.#headsFor(chunk.stream).replay);
    pieces.bytes(chunk.bytes);
    return cursor;
  }

  /** Appends an output_gap event; returns its id. */
  #gapPiece(pieces: Pieces, gap: ReplayGap): string {
    pieces.bytes(gapEvent(this.agentId, this.commandId, gap));
    return formatOutputCursor(gap.clock, gap.toSeq);
  }

  /** Retained raw bytes of `stream` in seq order, decoded back from the stored events (chat projection). */
  *rawChunks(stream: OutputStreamName): Generator<{ seq: number; bytes: Uint8Array }> {
    let after = 0;
    for (;;) {
      const page = this.ring.replayFrom(after, 1024, stream);
      for (const chunk of page.chunks) yield { seq: chunk.seq, bytes: rawOf(chunk.bytes) };
      after = page.next.seq;
      if (!page.more) return;
    }
  }

  #headsFor(stream: OutputStreamName): Heads {
    let h = this.#heads.get(stream);
    if (h === undefined) {
      h = headsOf(this.agentId, this.commandId, stream);
      this.#heads.set(stream, h);
    }
    return h;
  }
}

/** An output_gap event for a replay gap. */
function gapEvent(agentId: string, commandId: string, gap: ReplayGap): Uint8Array {
  const g = { agentId, commandId, fromSeq: gap.fromSeq, toSeq: gap.toSeq, reason: gap.reason, clock: gap.clock };
  return encodeGapSse(gap.lostBytes === undefined ? g : { ...g, lostBytes: gap.lostBytes });
}

/** The raw bytes of a stored event tail (`<ts>,"data_base64":"<b64>",...`). */
export function rawOf(tail: Uint8Array): Uint8Array {
  let i = 0;
  while (i < tail.byteLength && (tail[i] ?? 0) >= 0x30 && (tail[i] ?? 0) <= 0x39) i++;
  const from = i + 16;
  const b = Buffer.from(tail.buffer, tail.byteOffset, tail.byteLength);
  const to = b.indexOf(0x22, from);
  return Buffer.from(b.toString('latin1', from, to < 0 ? from : to), 'base64');
}

/**
 * An agent-scoped resume: the retained output of all of one agent's commands after `after`,
 * merged by clock (agent-replay.ts), as one buffer of events.
 */
export function agentReplay(replays: Iterable<CommandReplay>, after: OutputCursor, limit: number, stream?: OutputStreamName): ReplayBytes {
  const byId = new Map<string, CommandReplay>();
  for (const r of replays) byId.set(r.commandId, r);
  const page = replayAgentAfter(
    [...byId.values()].map((r) => r.ring),
    after,
    limit,
    stream,
  );
  const pieces = new Pieces();
  const out: ReplayBytes = { bytes: new Uint8Array(0), events: 0, chunks: 0, last: null, more: page.more };
  for (const item of page.items) {
    const replay = byId.get(item.commandId) as CommandReplay;
    if (item.gap !== undefined) {
      pieces.bytes(gapEvent(replay.agentId, item.commandId, item.gap));
      out.last = formatOutputCursor(item.gap.clock, item.gap.toSeq);
    } else {
      out.last = replay.chunkPiece(pieces, item.chunk);
      out.chunks++;
    }
    out.events++;
  }
  out.bytes = pieces.join();
  return out;
}

export type { Pieces };
