/**
 * Replays as ready-to-write SSE frames (actor side): `agent_output.replay` events for chunks and
 * `agent_output.error` output_gap events for seqs that cannot be delivered, in order, each with
 * its cursor. The main thread hands them to SseSubscriber.resumeLive and skips held live frames
 * up to `last` (afterOutputClock(last.clock)).
 */
import { replayAgentAfter } from './agent-replay.js';
import { formatOutputCursor, type OutputCursor } from '../protocol/output-cursor.js';
import { encodeGapSse, encodeOutputSse } from './encode.js';
import { ReplayOutputEncoder } from './output-event.js';
import type { OutputStreamName, ReplayGap, ReplayRing } from './replay-ring.js';

export interface ReplayFrames {
  frames: Array<{ frame: Uint8Array; cursor: string }>;
  /** Chunks among the frames. */
  chunks: number;
  /** Position of the last frame (null when there is none): resume or continue after it. */
  last: OutputCursor | null;
  /** More retained output follows `last` (call again from it). */
  more: boolean;
}

function gapFrame(agentId: string, commandId: string, gap: ReplayGap): { frame: Uint8Array; cursor: string } {
  const g = { agentId, commandId, fromSeq: gap.fromSeq, toSeq: gap.toSeq, reason: gap.reason, clock: gap.clock };
  return { frame: encodeGapSse(gap.lostBytes === undefined ? g : { ...g, lostBytes: gap.lostBytes }), cursor: formatOutputCursor(gap.clock, gap.toSeq) };
}

/**
 * One command's replay: after `afterSeq` (a resume: everything retained after it, `limit` chunks
 * per call), or when `afterSeq` is undefined the newest `limit` chunks (replay=true).
 */
export function commandReplaySse(agentId: string, ring: ReplayRing, req: { afterSeq?: number; limit: number; stream?: OutputStreamName }): ReplayFrames {
  const out: ReplayFrames = { frames: [], chunks: 0, last: null, more: false };
  const encoder = new ReplayOutputEncoder(agentId, ring);
  let after = req.afterSeq ?? ring.tailAfterSeq(req.limit, req.stream);
  for (;;) {
    const page = ring.replayFrom(after, req.limit - out.chunks, req.stream);
    if (page.gap !== undefined) {
      out.frames.push(gapFrame(agentId, ring.commandId, page.gap));
      out.last = { clock: page.gap.clock, seq: page.gap.toSeq };
    }
    for (const chunk of page.chunks) {
      const ev = encoder.next(chunk);
      out.frames.push({ frame: encodeOutputSse(ev, true), cursor: ev.cursor });
      out.last = { clock: chunk.clock, seq: chunk.seq };
    }
    out.chunks += page.chunks.length;
    after = page.next.seq;
    if (!page.more) return out;
    if (out.chunks >= req.limit) {
      out.more = true;
      return out;
    }
  }
}

/** An agent-scoped resume: the retained output of all `rings` (one agent) after `after`, merged by clock. */
export function agentReplaySse(agentId: string, rings: Iterable<ReplayRing>, after: OutputCursor, limit: number, stream?: OutputStreamName): ReplayFrames {
  const byId = new Map<string, ReplayRing>();
  for (const ring of rings) byId.set(ring.commandId, ring);
  const page = replayAgentAfter(byId.values(), after, limit, stream);
  const encoders = new Map<string, ReplayOutputEncoder>();
  const out: ReplayFrames = { frames: [], chunks: 0, last: null, more: page.more };
  for (const item of page.items) {
    if (item.gap !== undefined) {
      out.frames.push(gapFrame(agentId, item.commandId, item.gap));
      continue;
    }
    let encoder = encoders.get(item.commandId);
    if (encoder === undefined) {
      encoder = new ReplayOutputEncoder(agentId, byId.get(item.commandId) as ReplayRing);
      encoders.set(item.commandId, encoder);
    }
    const ev = encoder.next(item.chunk);
    out.frames.push({ frame: encodeOutputSse(ev, true), cursor: ev.cursor });
    out.chunks++;
  }
  if (page.items.length > 0) out.last = page.next;
  return out;
}
