import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  activityApiQuery,
  activityFieldProblem,
  activityFilterFromQuery,
  activityFilterProblem,
  activityFilterToQuery,
  activityScope,
  activitySummary,
  correlationPairs,
  coverageScopeText,
  gapsText,
  timeBound,
} from '../../../../src/dashboard/model/activity-view.js';
import { href, parseRoute, sectionOf } from '../../../../src/dashboard/model/routes.js';
import type { ActivityCollectorCoverage, ActivityEvent } from '../../../../src/client/types.js';

const coverage = (o: Partial<ActivityCollectorCoverage> = {}): ActivityCollectorCoverage => ({
  tenant_id: 't',
  host_id: 'h',
  instance_id: 'a',
  agent_id: 'a',
  collector_id: 'sandboxd',
  event_count: 3,
  first_sequence: 1,
  last_sequence: 9,
  durable_through_sequence: 9,
  first_occurred_at: null,
  last_occurred_at: null,
  last_ingested_at: null,
  sequence_gaps: [],
  jump_count: 0,
  ...o,
});

describe('activity view model', () => {
  test('the filter lives in the hash and round-trips; `*` scopes are the default and left out', () => {
    const route = parseRoute('#/activity?command_id=cmd-1&agent=agent-a&since=2026-11-27T09:00');
    assert.equal(route.view, 'activity');
    assert.equal(sectionOf(route), 'activity');
    const f = activityFilterFromQuery(route.view === 'activity' ? route.query : new URLSearchParams());
    assert.deepEqual(f, { ids: { command_id: 'cmd-1' }, since: '2026-11-27T09:00', until: '', agent: 'agent-a', instance: '*' });
    assert.equal(href.activity(activityFilterToQuery(f)), '#/activity?command_id=cmd-1&since=2026-11-27T09%3A00&agent=agent-a');
    assert.equal(href.activity(activityFilterToQuery({ ids: {}, since: '', until: '', agent: '*', instance: '*' })), '#/activity');
    assert.deepEqual(activityScope(f, 'tenant-x'), { tenant_id: 'tenant-x', host_id: '*', instance_id: '*', agent_id: 'agent-a' });
  });

  test('the API query: ids as given, times as UTC RFC 3339, the cursor of the last page', () => {
    const f = activityFilterFromQuery(new URLSearchParams('task_id=task-1&since=2026-11-27T09:00:00Z&until=garbage'));
    assert.deepEqual(activityApiQuery(f, 'ev-1'), { limit: 100, task_id: 'task-1', since: '2026-11-27T09:00:00.000Z', cursor: 'ev-1' });
    assert.equal(activityFilterProblem(f), '"garbage" is not a time');
    assert.equal(
      activityFilterProblem(activityFilterFromQuery(new URLSearchParams('since=2026-11-28T00:00Z&until=2026-11-27T00:00Z'))),
      'since is after until',
    );
    assert.equal(timeBound('2026-11-27'), null, 'a date alone is ambiguous');
    assert.equal(typeof timeBound('2026-11-27T09:30'), 'string', 'datetime-local (local time)');
  });

  test('fields the server would refuse are form errors', () => {
    assert.equal(activityFieldProblem('command_id', 'cmd-1'), null);
    assert.match(activityFieldProblem('command_id', 'has space') ?? '', /no spaces/);
    assert.match(activityFieldProblem('event_name', 'Command.Started') ?? '', /lowercase/);
    assert.equal(activityFieldProblem('agent', '*'), null);
  });

  test('coverage: gaps as ranges with the count missing, the scope readable', () => {
    assert.equal(gapsText(coverage()), 'none');
    const gaps = coverage({
      sequence_gaps: [
        { collector_id: 'sandboxd', first_missing_sequence: 3, last_missing_sequence: 5 },
        { collector_id: 'sandboxd', first_missing_sequence: 9, last_missing_sequence: 9 },
      ],
    });
    assert.equal(gapsText(gaps), '4 missing: 3–5, 9');
    assert.equal(coverageScopeText(coverage()), 'a on h');
    assert.equal(coverageScopeText(coverage({ instance_id: 'vm-1' })), 'a @ vm-1 on h');
  });

  test('an event: its correlation ids and a one-line summary of outcome and payload', () => {
    const e = {
      correlation: { tenant_id: 't', host_id: 'h', instance_id: 'a', agent_id: 'a', command_id: 'cmd-1', session_id: 's-1' },
      outcome: { status: 'failure', exit_code: 3 },
      payload: { argv0: 'make', nested: { x: 1 }, duration_ms: 12 },
    } as unknown as ActivityEvent;
    assert.deepEqual(correlationPairs(e), [
      ['session', 's-1'],
      ['command', 'cmd-1'],
    ]);
    assert.equal(activitySummary(e), 'failure · exit 3 · argv0=make · duration_ms=12');
  });
});
