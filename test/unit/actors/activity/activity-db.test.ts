/**
 * The SQLite activity store's pages at scale (actors/activity/activity-db.ts): whatever the read
 * scope and filters, a page walks an index (or the table) in position order from the cursor and
 * stops after limit + 1 rows. It never sorts: a sort would read every matching event, the whole
 * tenant's history, for each page.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ActivityDb } from '../../../../actors/activity/activity-db.js';
import type { ActivityCallQuery, ActivityCallReadScope } from '../../../../actors/protocol/activity-calls.js';
import { validateBatch } from '../../../../src/activity/record.js';
import { kTestScope, TestCollector } from '../../../support/activity-events.js';

void describe('activity db pages', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-activity-db-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  void test('every combination of scope and filters reads in position order from the cursor, without sorting', () => {
    const db = new ActivityDb(dir);
    try {
      const events = new TestCollector(kTestScope).batch(3, () => ({ correlation: { session_id: 's-1' } }));
      db.ingest(kTestScope, validateBatch({ events }, kTestScope), Date.now());
      const cursor = events[0]!['event_id'] as string;
      const { tenant_id, host_id, instance_id, agent_id } = kTestScope;
      const scopes: ActivityCallReadScope[] = [
        { tenant_id, host_id, instance_id, agent_id },
        { tenant_id, host_id: null, instance_id: null, agent_id: null },
        { tenant_id, host_id: null, instance_id: null, agent_id },
      ];
      const filters: Omit<ActivityCallQuery, 'limit'>[] = [
        {},
        { event_name: 'command.started' },
        { collector_id: 'runtime' },
        { since_ms: 0, until_ms: Date.now() },
        { session_id: 's-1' },
        { mission_id: 'm' },
        { task_id: 't' },
        { tool_call_id: 'tc' },
        { command_id: 'c' },
        { process_id: 'p' },
        { trace_id: 'a'.repeat(32) },
        { session_id: 's-1', event_name: 'command.started', collector_id: 'runtime' },
        { trace_id: 'a'.repeat(32), command_id: 'c', since_ms: 0 },
        { event_name: 'command.started', since_ms: 0, collector_id: 'runtime' },
      ];
      for (const scope of scopes)
        for (const f of filters)
          for (const withCursor of [false, true]) {
            const q: ActivityCallQuery = { ...f, limit: 100, ...(withCursor ? { cursor } : {}) };
            const plan = db.pagePlan(scope, q).join(' | ');
            const what = `${JSON.stringify(scope)} ${JSON.stringify(q)}: ${plan}`;
            assert.doesNotMatch(plan, /TEMP B-TREE/, what);
            assert.match(plan, /^SEARCH activity_events|^SCAN activity_events/, what);
            if (withCursor) assert.match(plan, /rowid>\?/, `${what} starts at the cursor`);
            // And the page itself answers.
            const page = db.events(scope, q);
            assert.equal(page.cursor_found, withCursor ? true : null);
          }
    } finally {
      db.close();
    }
  });
});
