/**
 * The events follow stream read as an EventSource reads it (src/client/sse-parser.ts follows the
 * HTML standard): `onmessage` listeners (the reference dashboard) get every event once through
 * the unnamed copy, `event`-name listeners (our client, dashboard, sbx) get it once too, with the
 * same id; a cut-off follower gets `lagged` before the slow-consumer `error`.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseSseText, type SseEvent } from '../../../src/client/sse-parser.js';
import { EventStore } from '../../../src/events/event-store.js';
import { registerEventRoutes } from '../../../src/events/routes.js';
import { inject, MemorySseSink } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';

async function follow(query: string): Promise<{ events: EventStore; sink: MemorySseSink; read: () => SseEvent[] }> {
  const router = new Router();
  const events = new EventStore();
  registerEventRoutes(router, { events });
  events.append({ event_type: 'vm.started', vm_name: 'agent-a', timestamp: '2026-03-01T10:00:00Z' });
  const r = await inject(router, { method: 'GET', url: `/api/v1/events?${query}` });
  assert.ok(r.sse, 'an SSE stream');
  const sink = new MemorySseSink();
  await r.sse.start(sink, r.sse.view);
  return { events, sink, read: () => parseSseText(sink.frames.join('')) };
}

describe('GET /api/v1/events?follow=true as an EventSource sees it', () => {
  test("the reference dashboard's request (follow=true&since=<now, RFC 3339>): each event once for onmessage and once for 'event'", async () => {
    const since = encodeURIComponent('2026-03-01T10:00:00.000Z');
    const { events, sink, read } = await follow(`follow=true&since=${since}`);
    events.append({ event_type: 'agent.connected', agent_id: 'agent-a' });
    events.append({ event_type: 'session.killed', agent_id: 'agent-a', details: { session_id: 's-1' } });
    const got = read();
    const unnamed = got.filter((e) => e.event === 'message');
    const named = got.filter((e) => e.event === 'event');
    assert.equal(got.length, unnamed.length + named.length, `only the two forms: ${JSON.stringify(got.map((e) => e.event))}`);
    for (const list of [unnamed, named]) {
      const records = list.map((e) => JSON.parse(e.data) as { id: number; event_type: string; timestamp: string });
      assert.deepEqual(
        records.map((r) => r.event_type),
        ['agent.connected', 'session.killed'],
        'the event at exactly since is not included; the live ones follow, once each',
      );
      for (const r of records) assert.ok(!Number.isNaN(Date.parse(r.timestamp)), 'the record the reference keys on has a timestamp');
      assert.deepEqual(
        list.map((e) => e.id),
        records.map((r) => String(r.id)),
        "each copy is dispatched with its event's id as the last event id",
      );
    }
    sink.close();
  });

  test('a follower cut off as slow gets lagged, then the error frame with its since', async () => {
    const { events, sink, read } = await follow('follow=true&since=0');
    sink.setBackpressure(true);
    const big = { blob: 'x'.repeat(15_000) };
    for (let i = 0; i < 200 && !sink.closed; i++) events.append({ event_type: 'vm.started', details: big });
    assert.ok(sink.closed, 'cut off once more than 1 MiB waited');
    const tail = read().slice(-2);
    assert.deepEqual(
      tail.map((e) => e.event),
      ['lagged', 'error'],
    );
    const [lagged, error] = tail.map((e) => JSON.parse(e.data) as { code: string; since: number });
    assert.equal(lagged?.code, 'slow_subscriber');
    assert.deepEqual(lagged, error, 'both carry the cursor to resume from');
  });
});
