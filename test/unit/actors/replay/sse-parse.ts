/** A minimal SSE parser for tests (fields per the HTML spec's event-stream interpretation). */
export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/** Parses complete events out of SSE text; comment lines are skipped. */
export function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    if (block.trim() === '') continue;
    const ev: SseEvent = { data: '' };
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') ev.id = value;
      else if (field === 'event') ev.event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length === 0 && ev.event === undefined) continue;
    ev.data = data.join('\n');
    out.push(ev);
  }
  return out;
}

export function parseOne(bytes: Uint8Array | string): SseEvent & { json: Record<string, unknown> } {
  const text = typeof bytes === 'string' ? bytes : new TextDecoder().decode(bytes);
  const events = parseSse(text);
  if (events.length !== 1) throw new Error(`expected one SSE event, got ${events.length}: ${text}`);
  const ev = events[0]!;
  return { ...ev, json: JSON.parse(ev.data) as Record<string, unknown> };
}
