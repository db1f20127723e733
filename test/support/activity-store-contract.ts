/**
 * The activity store's contract (src/activity/store.ts): one behaviour suite, run against every
 * implementation (SQLite: test/integration/activity-sqlite-store.test.ts; PostgreSQL:
 * test/integration/activity-postgres-store.test.ts). Each test opens a fresh, empty store.
 *
 * What a user of the store notices: an acknowledged event is there exactly once; a replay is a
 * no-op; a conflicting replay is refused whole; skipped sequences are recorded and reported; pages
 * neither repeat nor skip, even while ingest goes on (a reader tailing by cursor while big and
 * small batches commit at once misses none); scope and filters select exactly; retention
 * removes the oldest first and coverage follows.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { validateBatch } from '../../src/activity/record.js';
import { ANY_SCOPE, type ActivityEventQuery, type ActivityReadScope, type ActivityStore } from '../../src/activity/store.js';
import { SvcError } from '../../src/core/errors.js';
import type { ActivityEvent } from '../../src/wire/activity.js';
import { activityEvent, kTestScope, TestCollector, uuidV7, type TestActivityScope } from './activity-events.js';

const readScopeOf = (s: TestActivityScope): ActivityReadScope => ({
  tenant_id: s.tenant_id,
  host_id: s.host_id,
  instance_id: s.instance_id,
  agent_id: s.agent_id,
});

async function ingest(store: ActivityStore, scope: TestActivityScope, events: Record<string, unknown>[]) {
  return store.ingest(scope, validateBatch({ events }, scope));
}

/** Every event of a read scope, page by page (limit per page), with the page sizes. */
async function readAll(store: ActivityStore, scope: ActivityReadScope, limit: number, q: Partial<ActivityEventQuery> = {}) {
  const events: ActivityEvent[] = [];
  const pages: number[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await store.events(scope, { ...q, limit, ...(cursor === undefined ? {} : { cursor }) });
    if (cursor !== undefined) assert.equal(page.cursor_found, true);
    events.push(...page.events);
    pages.push(page.events.length);
    if (!page.has_more) return { events, pages, last: page };
    assert.ok(page.next_cursor !== null, 'has_more with no next_cursor');
    cursor = page.next_cursor;
  }
}

async function rejects(p: Promise<unknown>, code: string): Promise<SvcError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof SvcError, `expected SvcError ${code}, got ${String(err)}`);
    assert.equal(err.code, code);
    return err;
  }
  assert.fail(`expected ${code}, but it succeeded`);
}

const ids = (events: readonly { event_id: string }[] | readonly Record<string, unknown>[]) =>
  events.map((e) => (e as { event_id: string }).event_id);

export function activityStoreContract(name: string, open: () => Promise<ActivityStore>): void {
  async function withStore(fn: (store: ActivityStore) => Promise<void>): Promise<void> {
    const store = await open();
    try {
      await fn(store);
    } finally {
      await store.close();
    }
  }

  void describe(`activity store contract: ${name}`, () => {
    void test('an acknowledged batch is stored once, as ingested, and the acknowledgement lists it', () =>
      withStore(async (store) => {
        const c = new TestCollector(kTestScope);
        const batch = c.batch(10, (i) => ({ payload: { step: i, nested: { list: [1, 'two', null, true] } } }));
        const ack = await ingest(store, kTestScope, batch);
        assert.equal(ack.schema_version, 'activity.event/v1');
        assert.equal(ack.accepted, 10);
        assert.equal(ack.duplicates, 0);
        assert.deepEqual(ack.accepted_event_ids, ids(batch));
        assert.deepEqual(ack.duplicate_event_ids, []);
        assert.equal(ack.durable_through_sequence, 10);
        assert.deepEqual(ack.sequence_gaps_recorded, []);
        assert.deepEqual(ack.sequence_jumps, []);
        const page = await store.events(readScopeOf(kTestScope), { limit: 100 });
        assert.equal(page.cursor_found, null);
        assert.equal(page.has_more, false);
        assert.deepEqual(page.events, batch, 'events come back exactly as ingested, in ingest order');
        assert.equal(page.next_cursor, ids(batch).at(-1));
      }));

    void test('a replayed batch is a no-op: the same ids come back as duplicates, no second row', () =>
      withStore(async (store) => {
        const batch = new TestCollector(kTestScope).batch(5);
        await ingest(store, kTestScope, batch);
        const again = await ingest(store, kTestScope, batch);
        assert.equal(again.accepted, 0);
        assert.equal(again.duplicates, 5);
        assert.deepEqual(again.duplicate_event_ids, ids(batch));
        assert.deepEqual(again.sequence_jumps, []);
        assert.equal(again.durable_through_sequence, 5);
        const { events } = await readAll(store, readScopeOf(kTestScope), 100);
        assert.equal(events.length, 5);
        // A replay with the keys in another order is the same record.
        const reordered = batch.map((e) => Object.fromEntries(Object.entries(e).reverse()));
        const third = await ingest(store, kTestScope, reordered);
        assert.equal(third.duplicates, 5);
      }));

    void test('the same batch sent twice concurrently is stored once, and each event is accepted by exactly one request', () =>
      withStore(async (store) => {
        const batch = new TestCollector(kTestScope).batch(200);
        const acks = await Promise.all([
          ingest(store, kTestScope, batch),
          ingest(store, kTestScope, batch),
          ingest(store, kTestScope, batch),
        ]);
        const accepted = acks.flatMap((a) => a.accepted_event_ids);
        assert.deepEqual([...accepted].sort(), ids(batch).sort(), 'each id accepted once across the requests');
        for (const a of acks) assert.equal(a.accepted + a.duplicates, 200);
        const { events } = await readAll(store, readScopeOf(kTestScope), 5000);
        assert.deepEqual(ids(events).sort(), ids(batch).sort());
        const [cov] = await store.coverage(readScopeOf(kTestScope));
        assert.equal(cov?.event_count, 200);
        assert.equal(cov?.jump_count, 0);
      }));

    void test('an event_id stored with other content refuses the whole batch, and nothing of it is stored', () =>
      withStore(async (store) => {
        const c = new TestCollector(kTestScope);
        const [first] = c.batch(1);
        await ingest(store, kTestScope, [first!]);
        const changed = { ...first!, payload: { argv0: 'rm' } };
        const fresh = c.batch(1);
        const err = await rejects(ingest(store, kTestScope, [...fresh, changed]), 'activity.event_id_conflict');
        assert.equal(err.details?.['event_id'], first!['event_id']);
        assert.equal(err.details?.['event_index'], 1);
        const { events } = await readAll(store, readScopeOf(kTestScope), 100);
        assert.deepEqual(ids(events), [first!['event_id']], 'the fresh event of the refused batch was not stored');
        assert.deepEqual(events[0]!.payload, first!['payload']);
      }));

    void test('a sequence already stored under another event_id refuses the batch', () =>
      withStore(async (store) => {
        await ingest(store, kTestScope, new TestCollector(kTestScope).batch(3));
        const clash = activityEvent(kTestScope, 2);
        const err = await rejects(ingest(store, kTestScope, [activityEvent(kTestScope, 4), clash]), 'activity.sequence_conflict');
        assert.equal(err.details?.['event_id'], clash['event_id']);
        const { events } = await readAll(store, readScopeOf(kTestScope), 100);
        assert.equal(events.length, 3);
      }));

    void test('skipped sequences are recorded durably as gaps and reported as jumps', () =>
      withStore(async (store) => {
        const c = new TestCollector(kTestScope);
        await ingest(store, kTestScope, c.batch(2));
        c.skip(2);
        const after = c.batch(2);
        const ack = await ingest(store, kTestScope, after);
        assert.deepEqual(ack.sequence_jumps, [{ collector_id: 'runtime', event_id: after[0]!['event_id'], expected: 3, got: 5 }]);
        assert.deepEqual(ack.sequence_gaps_recorded, [{ collector_id: 'runtime', first_missing_sequence: 3, last_missing_sequence: 4 }]);
        assert.equal(ack.durable_through_sequence, 6, 'a recorded gap counts as settled');
        // A collector whose first event is not 1 has lost 1..n-1.
        const other = { ...kTestScope, collector_id: 'guest' };
        const late = await ingest(store, other, [activityEvent(other, 3)]);
        assert.deepEqual(
          late.sequence_jumps.map((j) => [j.expected, j.got]),
          [[1, 3]],
        );
        const cov = await store.coverage(readScopeOf(kTestScope));
        const runtime = cov.find((x) => x.collector_id === 'runtime');
        assert.deepEqual(runtime?.sequence_gaps, [{ collector_id: 'runtime', first_missing_sequence: 3, last_missing_sequence: 4 }]);
        assert.equal(runtime?.jump_count, 1);
        assert.equal(runtime?.event_count, 4);
        assert.equal(runtime?.first_sequence, 1);
        assert.equal(runtime?.last_sequence, 6);
        assert.equal(runtime?.durable_through_sequence, 6);
        assert.equal(cov.find((x) => x.collector_id === 'guest')?.event_count, 1);
        // Filling nothing in later: a replay of an old batch does not report the jump again.
        const replay = await ingest(store, kTestScope, after);
        assert.deepEqual(replay.sequence_jumps, []);
      }));

    void test('12,000 events read 5000 at a time: three pages, no duplicate, no gap, stable under concurrent ingest', () =>
      withStore(async (store) => {
        const c = new TestCollector(kTestScope);
        const written: string[] = [];
        for (let i = 0; i < 12; i++) {
          const b = c.batch(1000);
          written.push(...ids(b));
          await ingest(store, kTestScope, b);
        }
        const scope = readScopeOf(kTestScope);
        const got: string[] = [];
        const sizes: number[] = [];
        let cursor: string | undefined;
        let more = true;
        const other = new TestCollector({ ...kTestScope, collector_id: 'concurrent' });
        const concurrentIds: string[] = [];
        while (more) {
          // Ingest goes on between and during the reads.
          const extra = other.batch(50);
          concurrentIds.push(...ids(extra));
          const [page] = await Promise.all([
            store.events(scope, { limit: 5000, collector_id: 'runtime', ...(cursor === undefined ? {} : { cursor }) }),
            ingest(store, other.scope, extra),
          ]);
          got.push(...ids(page.events));
          sizes.push(page.events.length);
          more = page.has_more;
          cursor = page.next_cursor ?? undefined;
        }
        assert.deepEqual(sizes, [5000, 5000, 2000]);
        assert.equal(new Set(got).size, got.length, 'no event twice');
        assert.deepEqual(got, written, 'every event, in ingest order');
        // Everything, both collectors: nothing lost from the concurrent writer either.
        const all = await readAll(store, scope, 5000);
        assert.deepEqual(ids(all.events).sort(), [...written, ...concurrentIds].sort());
      }));

    void test('a cursor resumes after its event even when more arrive later; an unknown cursor says so and starts over', () =>
      withStore(async (store) => {
        const c = new TestCollector(kTestScope);
        const first = c.batch(3);
        await ingest(store, kTestScope, first);
        const scope = readScopeOf(kTestScope);
        const p1 = await store.events(scope, { limit: 10 });
        assert.equal(p1.has_more, false);
        const later = c.batch(2);
        await ingest(store, kTestScope, later);
        const p2 = await store.events(scope, { limit: 10, cursor: p1.next_cursor! });
        assert.equal(p2.cursor_found, true);
        assert.deepEqual(ids(p2.events), ids(later));
        const empty = await store.events(scope, { limit: 10, cursor: p2.next_cursor! });
        assert.deepEqual(empty.events, []);
        assert.equal(empty.has_more, false);
        assert.equal(empty.next_cursor, null);
        const unknown = await store.events(scope, { limit: 2, cursor: uuidV7() });
        assert.equal(unknown.cursor_found, false);
        assert.deepEqual(ids(unknown.events), ids(first).slice(0, 2));
        assert.equal(unknown.has_more, true);
      }));

    void test('filters select exactly: event name, collector, each correlation id, time bounds', () =>
      withStore(async (store) => {
        const c = new TestCollector(kTestScope);
        const base = Date.parse('2026-11-01T00:00:00.000Z');
        const keys = ['session_id', 'mission_id', 'task_id', 'tool_call_id', 'command_id', 'process_id'] as const;
        const batch = c.batch(30, (i) => ({
          event_name: i % 3 === 0 ? 'tool.call_started' : 'command.started',
          occurred_at: new Date(base + i * 60_000).toISOString(),
          correlation: {
            [keys[i % keys.length]!]: `id-${i % 5}`,
            ...(i % 4 === 0 ? { trace_id: (i % 8 === 0 ? 'a' : 'b').repeat(32) } : {}),
          },
        }));
        await ingest(store, kTestScope, batch);
        const scope = readScopeOf(kTestScope);
        const expect = async (q: Partial<ActivityEventQuery>, pick: (e: Record<string, unknown>, i: number) => boolean) => {
          const { events } = await readAll(store, scope, 7, q);
          assert.deepEqual(ids(events), ids(batch.filter(pick)), JSON.stringify(q));
          assert.ok(events.length > 0, `filter ${JSON.stringify(q)} selects something`);
        };
        const corr = (e: Record<string, unknown>) => e['correlation'] as Record<string, string>;
        await expect({ event_name: 'tool.call_started' }, (e) => e['event_name'] === 'tool.call_started');
        for (const k of keys) await expect({ [k]: 'id-1' }, (e) => corr(e)[k] === 'id-1');
        await expect({ trace_id: 'a'.repeat(32) }, (e) => corr(e)['trace_id'] === 'a'.repeat(32));
        await expect({ since_ms: base + 10 * 60_000, until_ms: base + 20 * 60_000 }, (_e, i) => i >= 10 && i <= 20);
        await expect(
          { event_name: 'command.started', since_ms: base + 25 * 60_000 },
          (e, i) => i >= 25 && e['event_name'] === 'command.started',
        );
        const none = await store.events(scope, { limit: 10, session_id: 'nobody' });
        assert.deepEqual(none.events, []);
        assert.equal(none.has_more, false);
      }));

    void test('scope: reads see only their tenant; host, instance and agent may be "*"', () =>
      withStore(async (store) => {
        const a = new TestCollector(kTestScope);
        const bScope = { ...kTestScope, instance_id: 'vm-2', agent_id: 'agent-2' };
        const b = new TestCollector(bScope);
        const tScope = { ...kTestScope, tenant_id: 'tenant-b' };
        const t = new TestCollector(tScope);
        const ea = a.batch(3);
        const eb = b.batch(4);
        await ingest(store, kTestScope, ea);
        await ingest(store, bScope, eb);
        await ingest(store, tScope, t.batch(5));
        const exact = await readAll(store, readScopeOf(kTestScope), 100);
        assert.deepEqual(ids(exact.events), ids(ea));
        const fleet = await readAll(store, { tenant_id: 'tenant-a', host_id: ANY_SCOPE, instance_id: ANY_SCOPE, agent_id: ANY_SCOPE }, 100);
        assert.deepEqual(ids(fleet.events), [...ids(ea), ...ids(eb)]);
        const byAgent = await readAll(
          store,
          { tenant_id: 'tenant-a', host_id: ANY_SCOPE, instance_id: ANY_SCOPE, agent_id: 'agent-2' },
          100,
        );
        assert.deepEqual(ids(byAgent.events), ids(eb));
        const cov = await store.coverage({ tenant_id: 'tenant-a', host_id: ANY_SCOPE, instance_id: ANY_SCOPE, agent_id: ANY_SCOPE });
        assert.deepEqual(
          cov.map((x) => [x.instance_id, x.agent_id, x.collector_id, x.event_count]),
          [
            ['vm-1', 'agent-1', 'runtime', 3],
            ['vm-2', 'agent-2', 'runtime', 4],
          ],
        );
        const stranger = await store.events({ ...readScopeOf(kTestScope), tenant_id: 'tenant-c' }, { limit: 10 });
        assert.deepEqual(stranger.events, []);
        assert.deepEqual(await store.coverage({ ...readScopeOf(kTestScope), tenant_id: 'tenant-c' }), []);
      }));

    void test('coverage: counts, sequences and time bounds per collector; one collector on request', () =>
      withStore(async (store) => {
        const c = new TestCollector(kTestScope);
        const base = Date.parse('2026-11-02T10:00:00.000Z');
        await ingest(
          store,
          kTestScope,
          c.batch(4, (i) => ({ occurred_at: new Date(base + (3 - i) * 1000).toISOString() })),
        );
        const g = new TestCollector({ ...kTestScope, collector_id: 'guest' });
        await ingest(store, g.scope, g.batch(2));
        const cov = await store.coverage(readScopeOf(kTestScope), 'runtime');
        assert.equal(cov.length, 1);
        const [r] = cov;
        assert.equal(r!.event_count, 4);
        assert.equal(r!.first_sequence, 1);
        assert.equal(r!.last_sequence, 4);
        assert.equal(Date.parse(r!.first_occurred_at!), base);
        assert.equal(Date.parse(r!.last_occurred_at!), base + 3000);
        assert.ok(r!.last_ingested_at !== null && Math.abs(Date.parse(r!.last_ingested_at) - Date.now()) < 60_000);
        assert.deepEqual(r!.sequence_gaps, []);
        assert.equal((await store.coverage(readScopeOf(kTestScope))).length, 2);
      }));

    void test('prune removes the oldest-ingested events first, at most the number asked, and coverage follows', () =>
      withStore(async (store) => {
        const c = new TestCollector(kTestScope);
        const first = c.batch(5);
        await ingest(store, kTestScope, first);
        const second = c.batch(5);
        await ingest(store, kTestScope, second);
        assert.equal(await store.prune(Date.now() - 3_600_000, 100), 0, 'nothing is older than an hour');
        assert.equal(await store.prune(Date.now() + 1000, 3), 3);
        const { events } = await readAll(store, readScopeOf(kTestScope), 100);
        assert.deepEqual(ids(events), [...ids(first).slice(3), ...ids(second)]);
        const [cov] = await store.coverage(readScopeOf(kTestScope));
        assert.equal(cov?.event_count, 7);
        assert.equal(cov?.durable_through_sequence, 10, 'pruning is not loss: sequences stay settled');
        assert.equal(await store.prune(Date.now() + 1000, 100), 7);
        const after = await ingest(store, kTestScope, c.batch(1));
        assert.deepEqual(after.sequence_jumps, [], 'the collector continues at 11 after retention removed 1..10');
        // A pruned event replayed is stored again (retention is not a tombstone).
        const back = await ingest(store, kTestScope, [first[0]!]);
        assert.equal(back.accepted, 1);
      }));

    void test('a reader tailing with cursors while big and small batches commit at once gets every event exactly once', async () => {
      // Positions are drawn when a row is inserted, not when it commits: unless commits follow the
      // positions, a reader can page past a position whose transaction commits later, and the
      // cursor skips that event for good.
      await withStore(async (store) => {
        // One collector sends big batches (a long insert), the others small ones that commit meanwhile.
        const writers = Array.from({ length: 3 }, (_, i) => ({
          c: new TestCollector({ ...kTestScope, collector_id: `c${i}` }),
          size: i === 0 ? 400 : 3,
          batches: i === 0 ? 4 : 60,
        }));
        const written: string[] = [];
        let writing = true;
        const writes = Promise.all(
          writers.map(async ({ c, size, batches }) => {
            for (let b = 0; b < batches; b++) {
              const batch = c.batch(size);
              await store.ingest(c.scope, validateBatch({ events: batch }, c.scope));
              written.push(...batch.map((e) => e['event_id'] as string));
            }
          }),
        ).finally(() => (writing = false));
        const seen: string[] = [];
        let cursor: string | undefined;
        const tailOnce = async (): Promise<void> => {
          const page = await store.events(readScopeOf(kTestScope), { limit: 50, ...(cursor === undefined ? {} : { cursor }) });
          seen.push(...page.events.map((e) => e.event_id));
          cursor = page.next_cursor ?? cursor;
        };
        while (writing) await tailOnce();
        await writes;
        for (let n = -1; n !== seen.length;) {
          n = seen.length;
          await tailOnce();
        }
        assert.equal(new Set(seen).size, seen.length, 'no event twice');
        assert.deepEqual([...seen].sort(), [...written].sort(), 'every acknowledged event reached the tailing reader');
      });
    });
  });
}
