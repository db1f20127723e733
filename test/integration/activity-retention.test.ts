/**
 * Activity retention (src/activity/retention.ts) on a real SQLite activity store, with the store's
 * and the retention's clock under the test's control: events ingested more than the retention
 * period ago go, in chunks, oldest first; newer ones and coverage stay right; ingest is served
 * between chunks; passes never overlap; stop() ends a pass after its current chunk.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { validateBatch } from '../../src/activity/record.js';
import { ActivityRetention } from '../../src/activity/retention.js';
import { SqliteActivityStore } from '../../src/activity/sqlite-store.js';
import type { ActivityReadScope, ActivityStore } from '../../src/activity/store.js';
import { kTestScope, TestCollector } from '../support/activity-events.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

const kDayMs = 86_400_000;
const T0 = Date.parse('2026-10-01T00:00:00.000Z');

const root = mkdtempSync(join(tmpdir(), 'sbx-activity-retention-'));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;

const readScope: ActivityReadScope = {
  tenant_id: kTestScope.tenant_id,
  host_id: kTestScope.host_id,
  instance_id: kTestScope.instance_id,
  agent_id: kTestScope.agent_id,
};

/** A fresh store whose ingest clock is `clock.ms`, and a collector writing to it. */
async function setUp(): Promise<{
  store: SqliteActivityStore;
  clock: { ms: number };
  c: TestCollector;
  ingest: (n: number) => Promise<string[]>;
}> {
  const clock = { ms: T0 };
  const store = await SqliteActivityStore.open(join(root, `t${++dirs}`), { now: () => clock.ms });
  const c = new TestCollector(kTestScope);
  const ingest = async (n: number): Promise<string[]> => {
    const events = c.batch(n);
    const ack = await store.ingest(kTestScope, validateBatch({ events }, kTestScope));
    return ack.accepted_event_ids;
  };
  return { store, clock, c, ingest };
}

/** The store's prune, counted: calls, rows asked, and the most calls ever in flight at once. */
function counted(store: ActivityStore): { prune: ActivityStore['prune']; calls: number[]; maxInFlight: number } {
  const seen = {
    calls: [] as number[],
    maxInFlight: 0,
    inFlight: 0,
    prune: async (beforeMs: number, maxRows: number): Promise<number> => {
      seen.calls.push(maxRows);
      seen.inFlight++;
      seen.maxInFlight = Math.max(seen.maxInFlight, seen.inFlight);
      try {
        return await store.prune(beforeMs, maxRows);
      } finally {
        seen.inFlight--;
      }
    },
  };
  return seen;
}

async function storedIds(store: ActivityStore): Promise<string[]> {
  const page = await store.events(readScope, { limit: 5000 });
  assert.equal(page.has_more, false);
  return page.events.map((e) => e.event_id);
}

void describe('activity retention', () => {
  void test('a pass deletes every event ingested before the retention period, in chunks, and keeps the newer ones', async () => {
    const { store, clock, ingest } = await setUp();
    try {
      for (let i = 0; i < 5; i++) await ingest(100);
      clock.ms = T0 + 8 * kDayMs;
      const recent = await ingest(50);
      clock.ms = T0 + 10 * kDayMs;
      const prune = counted(store);
      const retention = new ActivityRetention({ store: prune, retentionDays: 7, chunkRows: 37, now: () => clock.ms });
      assert.equal(await retention.runOnce(), 500);
      assert.deepEqual(prune.calls, Array<number>(14).fill(37), '13 full chunks of 37 and the last, short one');
      assert.deepEqual(await storedIds(store), recent);
      const [cov] = await store.coverage(readScope);
      assert.equal(cov?.event_count, 50);
      assert.equal(cov?.first_sequence, 501);
      assert.equal(cov?.durable_through_sequence, 550);
      assert.deepEqual(retention.stats(), { passes: 1, prunedEvents: 500, failedPasses: 0, lastPassEndedAtMs: clock.ms });
      // Nothing more is old enough: the next pass deletes nothing, in one call.
      assert.equal(await retention.runOnce(), 0);
      assert.equal(prune.calls.length, 15);
      // Two days later the recent batch is past the period too.
      clock.ms = T0 + 15 * kDayMs + 1;
      assert.equal(await retention.runOnce(), 50);
      assert.deepEqual(await storedIds(store), []);
    } finally {
      await store.close();
    }
  });

  void test('ingest is served between the chunks of a pass', async () => {
    const { store, clock, ingest } = await setUp();
    try {
      for (let i = 0; i < 4; i++) await ingest(500);
      clock.ms = T0 + 31 * kDayMs;
      const retention = new ActivityRetention({ store, retentionDays: 30, chunkRows: 100, now: () => clock.ms });
      const order: string[] = [];
      const pass = retention.runOnce().then((n) => {
        order.push('pass');
        return n;
      });
      // Posted while the first chunk is in the worker: it is answered before the pass's second chunk.
      const fresh = ingest(10).then((ids) => {
        order.push('ingest');
        return ids;
      });
      const [pruned, freshIds] = await Promise.all([pass, fresh]);
      assert.deepEqual(order, ['ingest', 'pass'], 'the ingest did not wait for the whole pass');
      assert.equal(pruned, 2000);
      assert.deepEqual(await storedIds(store), freshIds);
    } finally {
      await store.close();
    }
  });

  void test('passes never overlap: a pass asked for during one joins it', async () => {
    const { store, clock, ingest } = await setUp();
    try {
      for (let i = 0; i < 3; i++) await ingest(300);
      clock.ms = T0 + 2 * kDayMs;
      const prune = counted(store);
      const retention = new ActivityRetention({ store: prune, retentionDays: 1, chunkRows: 50, now: () => clock.ms });
      const results = await Promise.all([retention.runOnce(), retention.runOnce(), retention.runOnce()]);
      assert.deepEqual(results, [900, 900, 900], 'one pass, three callers');
      assert.equal(prune.maxInFlight, 1);
      assert.equal(retention.stats().passes, 1);
      assert.deepEqual(await storedIds(store), []);
    } finally {
      await store.close();
    }
  });

  void test('start runs a first pass shortly after and then one per interval; stop ends the schedule', async () => {
    const { store, clock, ingest } = await setUp();
    try {
      await ingest(20);
      clock.ms = T0 + 40 * kDayMs;
      const prune = counted(store);
      const retention = new ActivityRetention({ store: prune, retentionDays: 30, firstRunDelayMs: 1, intervalMs: 5, now: () => clock.ms });
      retention.start();
      retention.start();
      await waitFor('the first pass', () => retention.stats().passes >= 1, { deadlineMs: DEADLINE_MS.local });
      assert.deepEqual(await storedIds(store), []);
      // Events that age past the period are deleted by a later pass, with no call from outside.
      await ingest(5);
      clock.ms += 31 * kDayMs;
      await waitFor('a later pass to delete the aged events', async () => (await storedIds(store)).length === 0, {
        deadlineMs: DEADLINE_MS.local,
      });
      assert.equal(retention.stats().prunedEvents, 25);
      assert.equal(prune.maxInFlight, 1);
      await retention.stop();
      await retention.stop();
      const passes = retention.stats().passes;
      assert.equal(await retention.runOnce(), 0, 'a stopped retention runs no pass');
      assert.equal(retention.stats().passes, passes);
    } finally {
      await store.close();
    }
  });

  void test('stop during a pass ends it after the chunk in flight', async () => {
    const { store, clock, ingest } = await setUp();
    try {
      await ingest(1000);
      clock.ms = T0 + 31 * kDayMs;
      const retention = new ActivityRetention({ store, retentionDays: 30, chunkRows: 100, now: () => clock.ms });
      const pass = retention.runOnce();
      await retention.stop();
      assert.equal(await pass, 100);
      assert.equal((await storedIds(store)).length, 900);
    } finally {
      await store.close();
    }
  });

  void test('a pass that fails is logged and counted, and the next one succeeds', async () => {
    const { store, clock, ingest } = await setUp();
    try {
      await ingest(10);
      clock.ms = T0 + 31 * kDayMs;
      const errors: object[] = [];
      const infos: object[] = [];
      // The first pass meets a store that is closed (what a pass running during shutdown sees).
      const closed = await SqliteActivityStore.open(join(root, `t${++dirs}`));
      await closed.close();
      let fail = true;
      const flaky: Pick<ActivityStore, 'prune'> = {
        prune: (beforeMs, maxRows) => (fail ? closed : store).prune(beforeMs, maxRows),
      };
      const retention = new ActivityRetention({
        store: flaky,
        retentionDays: 30,
        now: () => clock.ms,
        logger: { info: (o) => infos.push(o), error: (o) => errors.push(o) },
      });
      assert.equal(await retention.runOnce(), 0);
      assert.equal(retention.stats().failedPasses, 1);
      assert.deepEqual(errors, [{ err: 'the activity store is closed', prunedEvents: 0 }]);
      fail = false;
      assert.equal(await retention.runOnce(), 10);
      assert.deepEqual(infos, [{ prunedEvents: 10, ingestedBefore: new Date(T0 + kDayMs).toISOString() }]);
    } finally {
      await store.close();
    }
  });

  void test('the retention period must be a positive number of days', () => {
    const store = { prune: () => Promise.resolve(0) };
    for (const retentionDays of [0, -1, Number.NaN, Number.POSITIVE_INFINITY])
      assert.throws(() => new ActivityRetention({ store, retentionDays }), RangeError);
    assert.throws(() => new ActivityRetention({ store, retentionDays: 1, chunkRows: 0 }), RangeError);
  });
});
