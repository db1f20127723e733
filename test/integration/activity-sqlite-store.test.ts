/**
 * The SQLite activity store (src/activity/sqlite-store.ts): the store contract
 * (test/support/activity-store-contract.ts) on a fresh directory per test, then what is SQLite's
 * own: the file and its modes, durability across close and reopen, the worker thread (the main
 * thread keeps running while the store waits for the database; a dead worker fails its calls and
 * is replaced), and a closed store.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { validateBatch } from '../../src/activity/record.js';
import { SqliteActivityStore } from '../../src/activity/sqlite-store.js';
import type { ActivityReadScope } from '../../src/activity/store.js';
import { SvcError } from '../../src/core/errors.js';
import { kTestScope, TestCollector, type TestActivityScope } from '../support/activity-events.js';
import { activityStoreContract } from '../support/activity-store-contract.js';

const root = mkdtempSync(join(tmpdir(), 'sbx-activity-sqlite-'));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
/** A fresh store directory (not yet created: the store makes it). */
const freshDir = (): string => join(root, `t${++dirs}`, 'activity');

activityStoreContract('sqlite', () => SqliteActivityStore.open(freshDir()));

const readScope: ActivityReadScope = {
  tenant_id: kTestScope.tenant_id,
  host_id: kTestScope.host_id,
  instance_id: kTestScope.instance_id,
  agent_id: kTestScope.agent_id,
};
const ingest = (store: SqliteActivityStore, events: Record<string, unknown>[], scope: TestActivityScope = kTestScope) =>
  store.ingest(scope, validateBatch({ events }, scope));

async function rejectsWith(p: Promise<unknown>, code: string): Promise<SvcError> {
  const err = await p.then(
    () => assert.fail(`expected ${code}, but it succeeded`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SvcError, `expected SvcError ${code}, got ${String(err)}`);
  assert.equal(err.code, code, err.message);
  return err;
}

void describe('SQLite activity store', () => {
  void test('the database is <dir>/activity.db: directory 0700, file 0600, WAL; what was acknowledged survives close and reopen', async () => {
    const dir = freshDir();
    const store = await SqliteActivityStore.open(dir);
    assert.equal(store.kind, 'sqlite');
    assert.equal(store.location, join(dir, 'activity.db'));
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(store.location).mode & 0o777, 0o600);
    const c = new TestCollector(kTestScope);
    const first = c.batch(20);
    await ingest(store, first);
    c.skip(3);
    const second = c.batch(5);
    await ingest(store, second);
    const page = await store.events(readScope, { limit: 100 });
    const coverage = await store.coverage(readScope);
    await store.close();

    const peek = new Database(store.location, { readonly: true });
    assert.equal(peek.pragma('journal_mode', { simple: true }), 'wal');
    peek.close();

    const again = await SqliteActivityStore.open(dir);
    try {
      assert.deepEqual(await again.events(readScope, { limit: 100 }), page);
      assert.deepEqual(await again.coverage(readScope), coverage);
      assert.deepEqual(coverage[0]?.sequence_gaps, [{ collector_id: 'runtime', first_missing_sequence: 21, last_missing_sequence: 23 }]);
      // The reopened store goes on where the first stopped: a replay is a duplicate, the next sequence no jump.
      const replay = await ingest(again, second);
      assert.equal(replay.duplicates, 5);
      const next = await ingest(again, c.batch(1));
      assert.deepEqual(next.sequence_jumps, []);
      assert.equal(next.durable_through_sequence, 29);
    } finally {
      await again.close();
    }
  });

  void test('a store whose directory cannot be made does not open: activity.store_unavailable', async () => {
    const file = join(root, 'not-a-dir');
    writeFileSync(file, 'x');
    const err = await rejectsWith(SqliteActivityStore.open(join(file, 'activity')), 'activity.store_unavailable');
    assert.match(err.message, /not-a-dir/);
  });

  void test('the main thread keeps running while the store waits for the database: the commit happens in the worker', async () => {
    const store = await SqliteActivityStore.open(freshDir());
    // Another connection, on this (the main) thread, holds the write lock. A store that wrote on the
    // main thread would block here in SQLite's busy wait, and the turns below that release the lock
    // could never run.
    const other = new Database(store.location);
    other.exec('BEGIN IMMEDIATE');
    try {
      const batch = new TestCollector(kTestScope).batch(1000);
      let settled = false;
      const pending = ingest(store, batch).finally(() => {
        settled = true;
      });
      let turns = 0;
      for (; turns < 20; turns++) await nextTurn();
      assert.equal(settled, false, 'nothing can commit while the lock is held');
      other.exec('COMMIT');
      const ack = await pending;
      assert.equal(ack.accepted, 1000);
      assert.equal(turns, 20);
      const [cov] = await store.coverage(readScope);
      assert.equal(cov?.event_count, 1000);
    } finally {
      other.close();
      await store.close();
    }
  });

  void test('close lets the calls made before it finish; calls after it reject with activity.store_unavailable', async () => {
    const store = await SqliteActivityStore.open(freshDir());
    const batch = new TestCollector(kTestScope).batch(50);
    const before = ingest(store, batch);
    const closing = store.close();
    assert.equal((await before).accepted, 50);
    await closing;
    await store.close();
    await rejectsWith(ingest(store, new TestCollector(kTestScope, 51).batch(1)), 'activity.store_unavailable');
    await rejectsWith(store.events(readScope, { limit: 10 }), 'activity.store_unavailable');
    await rejectsWith(store.coverage(readScope), 'activity.store_unavailable');
    await rejectsWith(store.prune(Date.now(), 10), 'activity.store_unavailable');
  });

  void test('a worker that dies fails its pending calls with activity.store_unavailable, stores nothing of them, and the next call gets a new worker', async () => {
    // The real worker behind a tripwire: its message listener is wrapped so that a batch with
    // payload.crash ends the thread before the real worker sees it.
    const real = new URL('../../actors/activity/sqlite-activity.worker.js', import.meta.url);
    const tripwire = [
      "import { parentPort } from 'node:worker_threads';",
      'const on = parentPort.on.bind(parentPort);',
      // An ingest carries rows (actors/protocol/activity-calls.ts ActivityRow); the record's JSON is the last column.
      "const crashes = (m) => m.op === 'ingest' && m.rows.some((r) => JSON.parse(r[r.length - 1]).payload.crash === true);",
      "parentPort.on = (name, fn) => on(name, name === 'message' ? (m) => (crashes(m) ? process.exit(7) : fn(m)) : fn);",
      `await import(${JSON.stringify(real.href)});`,
    ].join('\n');
    const workerUrl = new URL(`data:text/javascript,${encodeURIComponent(tripwire)}`);
    const store = await SqliteActivityStore.open(freshDir(), { workerUrl });
    try {
      const c = new TestCollector(kTestScope);
      const kept = c.batch(3);
      await ingest(store, kept);
      const doomed = c.batch(3, () => ({ payload: { crash: true } }));
      const [crash, read] = await Promise.allSettled([ingest(store, doomed), store.events(readScope, { limit: 10 })]);
      for (const r of [crash, read]) {
        assert.equal(r.status, 'rejected');
        assert.ok(r.reason instanceof SvcError);
        assert.equal(r.reason.code, 'activity.store_unavailable');
        assert.match(r.reason.message, /exit code 7/);
      }
      // A new worker, the same file: the acknowledged batch is there, the one that died with the worker is not.
      const page = await store.events(readScope, { limit: 10 });
      assert.deepEqual(
        page.events.map((e) => e.event_id),
        kept.map((e) => e['event_id']),
      );
      const retry = await ingest(store, c.batch(1));
      assert.deepEqual(
        retry.sequence_jumps.map((j) => [j.expected, j.got]),
        [[4, 7]],
        'the lost batch shows as a jump',
      );
    } finally {
      await store.close();
    }
  });
});
