import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { registerEventRoutes } from '../../../src/events/routes.js';
import { EventStore } from '../../../src/events/event-store.js';
import { inject, MemorySseSink } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';

function setup(): { router: Router; events: EventStore } {
  const router = new Router();
  const events = new EventStore();
  registerEventRoutes(router, { events });
  return { router, events };
}

describe('POST/GET /api/v1/events', () => {
  test('a valid record is stored and listed with the list envelope', async () => {
    const { router } = setup();
    const post = await inject(router, {
      method: 'POST',
      url: '/api/v1/events',
      body: { event_type: 'vm.started', vm_name: 'agent-x', timestamp: '2026-02-03T04:05:06Z', details: { reason: 'booted' }, agent_id: '', trace_id: null },
    });
    assert.equal(post.status, 200);
    assert.deepEqual(post.json(), { received: true });
    const list = await inject(router, { method: 'GET', url: '/api/v1/events?vm_name=agent-x' });
    assert.equal(list.status, 200);
    const body = list.json() as { events: { event_type: string; timestamp: string; details: unknown }[]; total_count: number; last_event_id: number };
    assert.equal(body.total_count, 1);
    assert.equal(body.last_event_id, 1);
    assert.equal(body.events[0]?.event_type, 'vm.started');
    assert.equal(body.events[0]?.timestamp, '2026-02-03T04:05:06.000Z');
    assert.deepEqual(body.events[0]?.details, { reason: 'booted' });
  });

  test('invalid records get 400 envelopes naming the problem', async () => {
    const { router, events } = setup();
    const bad: [unknown, RegExp][] = [
      [{}, /event_type/],
      [{ event_type: 'Not A Type' }, /event_type/],
      [{ event_type: 'vm.started', extra: 1 }, /unknown field\(s\): extra/],
      [{ event_type: 'vm.started', timestamp: 'yesterday' }, /timestamp/],
      [{ event_type: 'vm.started', details: [1] }, /details/],
      [{ event_type: 'vm.started', vm_name: 5 }, /vm_name/],
      [[1, 2], /object/],
    ];
    for (const [body, re] of bad) {
      const r = await inject(router, { method: 'POST', url: '/api/v1/events', body });
      assert.equal(r.status, 400, JSON.stringify(body));
      const env = r.json() as { error: { code: string; message: string } };
      assert.equal(env.error.code, 'request.invalid');
      assert.match(env.error.message, re);
    }
    assert.equal(events.stats().retained, 0);
  });

  test('bad query values are 400', async () => {
    const { router } = setup();
    for (const q of ['limit=0', 'limit=5001', 'limit=abc', 'since=-1', 'event_type=%20x', 'follow=maybe']) {
      const r = await inject(router, { method: 'GET', url: `/api/v1/events?${q}` });
      assert.equal(r.status, 400, q);
    }
  });

  test('follow=true streams new matching events', async () => {
    const { router, events } = setup();
    events.append({ event_type: 'agent.connected', agent_id: 'a' });
    const r = await inject(router, { method: 'GET', url: '/api/v1/events?follow=true&since=0&event_type=agent.*' });
    assert.ok(r.sse, 'an SSE stream');
    const sink = new MemorySseSink();
    await r.sse.start(sink, r.sse.view);
    events.append({ event_type: 'vm.started' });
    events.append({ event_type: 'agent.disconnected', agent_id: 'a' });
    const text = sink.frames.join('');
    assert.match(text, /id: 1\nevent: event\ndata: .*agent\.connected/);
    assert.match(text, /id: 3\nevent: event\ndata: .*agent\.disconnected/);
    assert.doesNotMatch(text, /vm\.started/);
  });

  test('a follower that stops reading is cut off with slow_subscriber and its since; resuming from it misses nothing', async () => {
    const { router, events } = setup();
    const big = { blob: 'x'.repeat(15_000) };
    const ids = (sink: MemorySseSink): number[] => [...sink.frames.join('').matchAll(/^id: (\d+)$/gmu)].map((m) => Number(m[1]));
    const r = await inject(router, { method: 'GET', url: '/api/v1/events?follow=true' });
    assert.ok(r.sse);
    const slow = new MemorySseSink();
    await r.sse.start(slow, r.sse.view);
    for (let i = 0; i < 3; i++) events.append({ event_type: 'vm.started', details: big });
    slow.setBackpressure(true);
    for (let i = 0; i < 100 && !slow.closed; i++) events.append({ event_type: 'vm.started', details: big });
    assert.ok(slow.closed, 'cut off once more than 1 MiB waited');
    const notice = /event: error\ndata: (.*)\n\n$/u.exec(slow.frames.join(''));
    const hint = JSON.parse(notice?.[1] ?? '{}') as { code?: string; since?: number };
    assert.equal(hint.code, 'slow_subscriber');
    assert.equal(hint.since, ids(slow).at(-1), 'since is the last event handed to the stream');
    for (let i = 0; i < 5; i++) events.append({ event_type: 'vm.started' });

    const again = await inject(router, { method: 'GET', url: `/api/v1/events?follow=true&since=${hint.since}&limit=5000` });
    assert.ok(again.sse);
    const resumed = new MemorySseSink();
    await again.sse.start(resumed, again.sse.view);
    const all = events.query({ limit: 5000 }).events.map((e) => e.id);
    assert.deepEqual([...ids(slow), ...ids(resumed)], all, 'every event once, in order');
    resumed.close();
  });
});
