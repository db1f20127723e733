import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseRfc3339, registerEventRoutes } from '../../../src/events/routes.js';
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
      body: {
        event_type: 'vm.started',
        vm_name: 'agent-x',
        timestamp: '2026-02-03T04:05:06Z',
        details: { reason: 'booted' },
        agent_id: '',
        trace_id: null,
      },
    });
    assert.equal(post.status, 200);
    assert.deepEqual(post.json(), { received: true });
    const list = await inject(router, { method: 'GET', url: '/api/v1/events?vm_name=agent-x' });
    assert.equal(list.status, 200);
    const body = list.json() as {
      events: { event_type: string; timestamp: string; details: unknown }[];
      total_count: number;
      last_event_id: number;
    };
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

  test('since as an RFC 3339 date-time lists the events whose timestamp is after it', async () => {
    const { router, events } = setup();
    events.append({ event_type: 'vm.started', vm_name: 'agent-a', timestamp: '2026-03-01T10:00:00.000Z' });
    events.append({ event_type: 'vm.stopped', vm_name: 'agent-a', timestamp: '2026-03-01T10:00:01.000Z' });
    events.append({ event_type: 'vm.started', vm_name: 'agent-b', timestamp: '2026-03-01T10:00:02.500Z' });
    events.append({ event_type: 'vm.stopped', vm_name: 'agent-b', timestamp: '2026-03-01T10:00:03.000Z' });
    type Page = { events: { id: number; timestamp: string }[]; total_count: number; last_event_id: number };
    const list = async (q: string): Promise<Page> => {
      const r = await inject(router, { method: 'GET', url: `/api/v1/events?${q}` });
      assert.equal(r.status, 200, `${q}: ${r.text}`);
      return r.json() as Page;
    };
    const ids = async (q: string): Promise<number[]> => (await list(q)).events.map((e) => e.id);
    // Strictly after: an event at exactly the given time is not included.
    assert.deepEqual(await ids(`since=${encodeURIComponent('2026-03-01T10:00:01Z')}`), [3, 4]);
    assert.deepEqual(await ids(`since=${encodeURIComponent('2026-03-01T10:00:00.999Z')}`), [2, 3, 4]);
    // Offsets, lower-case t/z and fractions of any length are RFC 3339 too.
    assert.deepEqual(await ids(`since=${encodeURIComponent('2026-03-01T12:00:02+02:00')}`), [3, 4]);
    assert.deepEqual(await ids(`since=${encodeURIComponent('2026-03-01T05:00:02.4999999-05:00')}`), [3, 4]);
    assert.deepEqual(await ids(`since=${encodeURIComponent('2026-03-01t10:00:02.5z')}`), [4]);
    assert.deepEqual(await ids(`since=${encodeURIComponent('2026-03-01T10:00:03Z')}`), []);
    // Combined with the other filters and limit; total_count counts the matches before limit.
    assert.deepEqual(await ids(`since=${encodeURIComponent('2026-01-01T00:00:00Z')}&vm_name=agent-b`), [3, 4]);
    const limited = await list(`since=${encodeURIComponent('2026-01-01T00:00:00Z')}&limit=2`);
    assert.deepEqual(
      limited.events.map((e) => e.id),
      [3, 4],
    );
    assert.equal(limited.total_count, 4);
    assert.equal(limited.last_event_id, 4);
    // The integer cursor keeps its meaning.
    assert.deepEqual(await ids('since=2'), [3, 4]);
    assert.deepEqual(await ids('since=0'), [1, 2, 3, 4]);
  });

  test('follow=true with an RFC 3339 since replays the stored events after it, then live ones after it', async () => {
    const { router, events } = setup();
    events.append({ event_type: 'vm.started', timestamp: '2026-03-01T10:00:00Z' });
    events.append({ event_type: 'vm.stopped', timestamp: '2026-03-01T10:00:05Z' });
    const r = await inject(router, {
      method: 'GET',
      url: `/api/v1/events?follow=true&since=${encodeURIComponent('2026-03-01T10:00:01Z')}`,
    });
    assert.ok(r.sse, 'an SSE stream');
    const sink = new MemorySseSink();
    await r.sse.start(sink, r.sse.view);
    events.append({ event_type: 'vm.defined' }); // now: after the since time
    events.append({ event_type: 'vm.undefined', timestamp: '2026-03-01T09:00:00Z' }); // a late report from before it
    events.append({ event_type: 'vm.started', timestamp: '2026-03-01T10:00:02Z' });
    const got = [...sink.frames.join('').matchAll(/^id: (\d+)\nevent: event\n/gmu)].map((m) => Number(m[1]));
    assert.deepEqual(got, [2, 3, 5]);
    sink.close();
  });

  test('a since that is neither an event id nor an RFC 3339 date-time is 400 naming since', async () => {
    const { router } = setup();
    const bad = [
      'yesterday',
      '',
      '1.5',
      '1e3',
      '2026-03-01',
      '2026-03-01T10:00:00', // no offset
      '2026-03-01 10:00:00Z', // RFC 3339 allows the space only by note; we take the T
      '2026-02-30T00:00:00Z', // no such day
      '2026-13-01T00:00:00Z',
      '2026-03-01T24:00:00Z',
      '2026-03-01T10:60:00Z',
      '2026-03-01T10:00:00+24:00',
      'Sun, 01 Mar 2026 10:00:00 GMT',
    ];
    for (const v of bad) {
      const r = await inject(router, { method: 'GET', url: `/api/v1/events?since=${encodeURIComponent(v)}` });
      assert.equal(r.status, 400, JSON.stringify(v));
      const env = r.json() as { error: { code: string; message: string } };
      assert.equal(env.error.code, 'request.invalid');
      assert.match(env.error.message, /since must be an event id .* or an RFC 3339 date-time/, JSON.stringify(v));
      const follow = await inject(router, { method: 'GET', url: `/api/v1/events?follow=true&since=${encodeURIComponent(v)}` });
      assert.equal(follow.status, 400, `follow ${JSON.stringify(v)}`);
    }
    for (const q of ['since=-1', 'since=2026-03-01T10:00:00Z&since=1']) {
      const r = await inject(router, { method: 'GET', url: `/api/v1/events?${q}` });
      assert.equal(r.status, 400, q);
      assert.match((r.json() as { error: { message: string } }).error.message, /since/);
    }
  });

  test('parseRfc3339: offsets, fractions, leap seconds and range checks', () => {
    assert.equal(parseRfc3339('2026-03-01T10:00:00Z'), Date.UTC(2026, 2, 1, 10));
    assert.equal(parseRfc3339('2026-03-01T12:30:00+02:30'), Date.UTC(2026, 2, 1, 10));
    assert.equal(parseRfc3339('2026-03-01T00:00:00-00:00'), Date.UTC(2026, 2, 1));
    assert.equal(parseRfc3339('2026-03-01T10:00:00.1239Z'), Date.UTC(2026, 2, 1, 10, 0, 0, 123));
    assert.equal(parseRfc3339('2016-12-31T23:59:60Z'), Date.UTC(2016, 11, 31, 23, 59, 59, 999));
    assert.equal(parseRfc3339('2024-02-29T00:00:00Z'), Date.UTC(2024, 1, 29));
    for (const bad of ['2025-02-29T00:00:00Z', '2026-03-01T10:00:00', '2026-03-01T10:00Z', '12', '2026-03-01T10:00:00+0200']) {
      assert.equal(parseRfc3339(bad), undefined, bad);
    }
  });
});
