import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  detailsSummary,
  EventLog,
  eventsApiQuery,
  filterFromQuery,
  filterToQuery,
  type EventRow,
} from '../../../../src/dashboard/model/event-log.js';

const ev = (id: number, type = 'vm.started'): EventRow => ({
  id,
  event_type: type,
  vm_name: 'agent-1',
  agent_id: '',
  timestamp: '2026-01-01T00:00:00Z',
  details: {},
  trace_id: null,
});

describe('dashboard event log', () => {
  test('filters map to the API query; a trailing dot is a prefix', () => {
    assert.equal(eventsApiQuery({ type: 'vm.', agentId: '', vmName: '' }).toString(), 'event_type=vm.*');
    assert.equal(
      eventsApiQuery({ type: 'agent.connected', agentId: 'a', vmName: 'v' }, { since: 5, follow: true, limit: 200 }).toString(),
      'event_type=agent.connected&agent_id=a&vm_name=v&since=5&limit=200&follow=true',
    );
    assert.equal(eventsApiQuery({ type: 'VM.*', agentId: ' ', vmName: '' }).toString(), 'event_type=vm.*');
    assert.equal(eventsApiQuery({ type: 'x y<z>', agentId: '', vmName: '' }).get('event_type'), 'xyz');
    const f = { type: 'vm.', agentId: 'a', vmName: '' };
    assert.deepEqual(filterFromQuery(filterToQuery(f)), f);
  });

  test('duplicates are skipped and the log is bounded', () => {
    const log = new EventLog(3);
    assert.equal(log.add([ev(1), ev(2)]).length, 2);
    assert.equal(log.add([ev(2), ev(3)]).length, 1);
    log.add([ev(4), ev(5)]);
    assert.deepEqual(
      log.entries.map((e) => (e.kind === 'event' ? e.event.id : -1)),
      [3, 4, 5],
    );
    assert.equal(log.lastId, 5);
  });

  test('a server that restarted (its last id below our cursor) is noticed and the cursor restarts', () => {
    const log = new EventLog();
    log.add([ev(40), ev(41)]);
    assert.equal(log.checkServerCursor(45), null);
    const marker = log.checkServerCursor(3);
    assert.ok(marker !== null && marker.kind === 'marker' && /restarted/.test(marker.text));
    assert.equal(log.lastId, 0);
    assert.equal(log.add([ev(1), ev(2)]).length, 2);
  });

  test('details fit on one line', () => {
    assert.equal(detailsSummary({ a: 1, b: 'x', c: { d: true } }), 'a=1 b=x c={"d":true}');
    assert.ok(detailsSummary({ long: 'y'.repeat(500) }).length <= 160);
  });
});
