/**
 * The SQLite activity store's SQL (actors/activity/activity-db.ts), below the worker:
 * - a group commit (the worker's: every ingest already waiting, in one transaction) keeps each batch
 *   all or nothing on its own, and each batch sees the ones before it;
 * - whatever the read scope and filters, a page walks an index (or the table) in position order
 *   from the cursor and stops after limit + 1 rows. It never sorts: a sort would read every
 *   matching event, the whole tenant's history, for each page.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ActivityDb } from '../../../../actors/activity/activity-db.js';
import { activityRowOf, type ActivityCallQuery, type ActivityCallReadScope } from '../../../../actors/protocol/activity-calls.js';
import { validateBatch } from '../../../../src/activity/record.js';
import { kTestScope, TestCollector } from '../../../support/activity-events.js';

void describe('activity db', () => {
  const root = mkdtempSync(join(tmpdir(), 'sbx-activity-db-'));
  after(() => rmSync(root, { recursive: true, force: true }));
  let dirs = 0;
  const freshDir = (): string => join(root, `t${++dirs}`);

  void test('a group commit stores each batch all or nothing on its own, in order', () => {
    const db = new ActivityDb(freshDir());
    try {
      const c = new TestCollector(kTestScope);
      const first = c.batch(3);
      db.ingest(
        kTestScope,
        validateBatch({ events: first }, kTestScope).map((v) => v.event),
        Date.now(),
      );
      const a = c.batch(2);
      // b: a fresh event, then first[0] changed (an event_id conflict): refused whole.
      const bFresh = new TestCollector({ ...kTestScope, collector_id: 'other' }).batch(1);
      const bScope = { ...kTestScope, collector_id: 'other' };
      const b = validateBatch({ events: bFresh }, bScope).map((v) => v.event);
      const conflicting = validateBatch({ events: [{ ...first[0]!, payload: { changed: true } }] }, kTestScope).map((v) => v.event);
      c.skip(2);
      const d = c.batch(2);
      const outcomes = db.ingestGroup([
        { scope: kTestScope, rows: validateBatch({ events: a }, kTestScope).map((v) => activityRowOf(v.event)), nowMs: Date.now() },
        { scope: bScope, rows: b.map(activityRowOf), nowMs: Date.now() },
        { scope: kTestScope, rows: conflicting.map(activityRowOf), nowMs: Date.now() },
        { scope: kTestScope, rows: validateBatch({ events: d }, kTestScope).map((v) => activityRowOf(v.event)), nowMs: Date.now() },
      ]);
      assert.deepEqual(
        outcomes.map((o) => (o.ok ? o.ack.accepted : o.error.code)),
        [2, 1, 'activity.event_id_conflict', 2],
      );
      const last = outcomes[3];
      assert.ok(last?.ok === true);
      // d saw a's sequences (4, 5) in the same transaction: the jump is 6 → 8.
      assert.deepEqual(
        last.ack.sequence_jumps.map((j) => [j.expected, j.got]),
        [[6, 8]],
      );
      const { tenant_id, host_id, instance_id, agent_id } = kTestScope;
      const page = db.events({ tenant_id, host_id, instance_id, agent_id }, { limit: 100 });
      assert.deepEqual(
        page.events.map((e) => e.event_id),
        [...first, ...a, ...bFresh, ...d].map((e) => e['event_id']),
      );
      assert.deepEqual(page.events[0]?.payload, first[0]!['payload'], 'the conflicting replay changed nothing');
    } finally {
      db.close();
    }
  });

  void test('every combination of scope and filters reads in position order from the cursor, without sorting', () => {
    const db = new ActivityDb(freshDir());
    try {
      const events = new TestCollector(kTestScope).batch(3, () => ({ correlation: { session_id: 's-1' } }));
      db.ingest(
        kTestScope,
        validateBatch({ events }, kTestScope).map((v) => v.event),
        Date.now(),
      );
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
