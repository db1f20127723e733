/**
 * Replay for streams filtered by agent only: the retained output of all the agent's commands
 * after an agent-scoped cursor, merged in clock order (see actors/protocol/output-cursor.ts),
 * with each command's gaps placed where they occur in that order. The rings must belong to one
 * agent (one CursorClock).
 */
import type { OutputCursor } from '../protocol/output-cursor.js';
import type { OutputStreamName, ReplayChunk, ReplayGap, ReplayRing } from './replay-ring.js';

/** One merged item: a chunk or a gap of one command. */
export type AgentReplayItem =
  | { readonly commandId: string; readonly chunk: ReplayChunk; readonly gap?: undefined }
  | { readonly commandId: string; readonly gap: ReplayGap; readonly chunk?: undefined };

export interface AgentReplayPage {
  /** In clock order. The id of each item is `<clock>-<seq>` (a gap's seq is its toSeq). */
  items: AgentReplayItem[];
  /** Cursor of the last item (the given cursor when there is none): continue from it. */
  next: OutputCursor;
  /** True when more retained output follows `next`. */
  more: boolean;
}

interface Source {
  ring: ReplayRing;
  items: Array<{ key: OutputCursor; item: AgentReplayItem }>;
  at: number;
  afterSeq: number;
  more: boolean;
}

/**
 * Up to `limit` chunks (of `stream` only, when given) of any of `rings` after `cursor`, merged
 * by clock, with the gaps that precede them. Page through with `next` while `more`.
 */
export function replayAgentAfter(
  rings: Iterable<ReplayRing>,
  cursor: OutputCursor,
  limit: number,
  stream?: OutputStreamName,
): AgentReplayPage {
  if (!(limit >= 1)) throw new RangeError(`replay limit must be at least 1, got ${limit}`);
  const sources: Source[] = [];
  for (const ring of rings) {
    const src: Source = { ring, items: [], at: 0, afterSeq: ring.seqAtCursor(cursor), more: true };
    if (fill(src, limit, stream)) sources.push(src);
  }
  const page: AgentReplayPage = { items: [], next: cursor, more: false };
  let chunks = 0;
  for (;;) {
    let best: Source | undefined;
    for (const src of sources) {
      if (src.at >= src.items.length && !fill(src, limit, stream)) continue;
      if (best === undefined || before(headKey(src), headKey(best))) best = src;
    }
    if (best === undefined) return page;
    const { key, item } = best.items[best.at] as Source['items'][number];
    if (item.chunk !== undefined && chunks >= limit) {
      page.more = true;
      return page;
    }
    best.at++;
    if (item.chunk !== undefined) chunks++;
    page.items.push(item);
    page.next = key;
  }
}

function headKey(src: Source): OutputCursor {
  return (src.items[src.at] as Source['items'][number]).key;
}

function before(a: OutputCursor, b: OutputCursor): boolean {
  return a.clock < b.clock || (a.clock === b.clock && a.seq < b.seq);
}

/** Loads the source's next page when its buffer is used up; false when the ring has nothing more. */
function fill(src: Source, limit: number, stream: OutputStreamName | undefined): boolean {
  while (src.at >= src.items.length) {
    if (!src.more) return false;
    const page = src.ring.replayFrom(src.afterSeq, limit, stream);
    src.items = [];
    src.at = 0;
    const commandId = src.ring.commandId;
    if (page.gap !== undefined) src.items.push({ key: { clock: page.gap.clock, seq: page.gap.toSeq }, item: { commandId, gap: page.gap } });
    for (const chunk of page.chunks) src.items.push({ key: { clock: chunk.clock, seq: chunk.seq }, item: { commandId, chunk } });
    src.afterSeq = page.next.seq;
    src.more = page.more;
  }
  return true;
}
