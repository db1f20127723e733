import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EventStore } from '../../../src/events/event-store.js';

describe('event store', () => {
  test('ids are monotonic, defaults are filled, queries filter and page', () => {
    const s = new EventStore({ now: () => Date.parse('2026-01-01T00:00:00Z') });
    s.append({ event_type: 'vm.started', vm_name: 'agent-a' });
    s.append({ event_type: 'agent.connected', agent_id: 'a1' });
    s.append({ event_type: 'agent.registered', agent_id: 'a1' });
    const all = s.query({ limit: 100 });
    assert.deepEqual(
      all.events.map((e) => e.id),
      [1, 2, 3],
    );
    assert.equal(all.total_count, 3);
    assert.equal(all.last_event_id, 3);
    assert.deepEqual(all.events[0], {
      id: 1,
      event_type: 'vm.started',
      vm_name: 'agent-a',
      timestamp: '2026-01-01T00:00:00.000Z',
      details: {},
      agent_id: '',
      trace_id: null,
    });
    assert.deepEqual(
      s.query({ eventType: 'agent.*', limit: 100 }).events.map((e) => e.id),
      [2, 3],
    );
    assert.deepEqual(
      s.query({ since: 2, limit: 100 }).events.map((e) => e.id),
      [3],
    );
    const page = s.query({ limit: 2 });
    assert.deepEqual(
      page.events.map((e) => e.id),
      [2, 3],
      'the newest matches, oldest first',
    );
    assert.equal(page.total_count, 3);
  });

  test('bounded by count and bytes: the oldest go first and ids are never reused', () => {
    const s = new EventStore({ maxEvents: 5, maxBytes: 1_000_000 });
    for (let i = 0; i < 20; i++) s.append({ event_type: 'vm.defined', details: { i } });
    const page = s.query({ limit: 100 });
    assert.deepEqual(
      page.events.map((e) => e.id),
      [16, 17, 18, 19, 20],
    );
    const big = new EventStore({ maxEvents: 1000, maxBytes: 2000 });
    for (let i = 0; i < 50; i++) big.append({ event_type: 'vm.defined', details: { pad: 'x'.repeat(200) } });
    assert.ok(big.stats().bytes <= 2000);
    assert.ok(big.stats().retained < 50 && big.stats().retained > 0);
  });

  test('agent.heartbeat is sampled per agent', () => {
    let now = 0;
    const s = new EventStore({ heartbeatSampleMs: 60_000, now: () => now });
    assert.ok(s.append({ event_type: 'agent.heartbeat', agent_id: 'a' }));
    now = 30_000;
    assert.equal(s.append({ event_type: 'agent.heartbeat', agent_id: 'a' }), null);
    assert.ok(s.append({ event_type: 'agent.heartbeat', agent_id: 'b' }), 'another agent has its own sample clock');
    now = 61_000;
    assert.ok(s.append({ event_type: 'agent.heartbeat', agent_id: 'a' }));
  });

  test('live listeners see every appended event once', () => {
    const s = new EventStore();
    const seen: number[] = [];
    const off = s.subscribe((e) => seen.push(e.id));
    s.append({ event_type: 'vm.started' });
    s.append({ event_type: 'vm.stopped' });
    off();
    s.append({ event_type: 'vm.crashed' });
    assert.deepEqual(seen, [1, 2]);
  });
});
