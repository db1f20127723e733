/**
 * The self-collector on a real store (PostgreSQL: Debian's package, started by the test; its
 * outage is real: connections refused and cut): events are stored in batches with one sequence per
 * scope from 1; a new collector on the same store (a restart of sandboxd) numbers on after what is
 * stored, without a conflict or a jump; while the store is down the flush is retried, the bounded
 * queue drops its oldest events, and once the store is back the rest is stored and the dropped
 * run is a recorded gap.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import pino from 'pino';
import { PostgresActivityStore } from '../../src/activity/postgres-store.js';
import { SELF_COLLECTOR_ID, SelfCollector } from '../../src/activity/self-collector.js';
import type { SelfDraft } from '../../src/activity/self-records.js';
import { ActivityService } from '../../src/activity/service.js';
import type { ActivityCollectorCoverage } from '../../src/wire/activity.js';
import { startPostgres, type TestPostgres } from '../support/postgres.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';

const logger = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
let n = 0;
const draft = (agentId: string): SelfDraft => ({
  agentId,
  eventName: 'command.started',
  plane: 'runtime',
  occurredAt: new Date().toISOString(),
  correlation: { command_id: `cmd-${++n}` },
  outcome: { status: 'started' },
  payload: { argv0: 'make' },
});

describe('the self-collector on a real store', { timeout: 180_000 }, () => {
  let server: TestPostgres;
  before(async () => {
    server = await startPostgres();
  });
  after(() => server?.stop());

  const open = async (url: string): Promise<{ store: PostgresActivityStore; service: ActivityService }> => {
    const store = await PostgresActivityStore.open(url);
    return { store, service: new ActivityService({ store, tenantId: 'tenant-1', hostId: 'host-1' }) };
  };
  const coverageOf = async (service: ActivityService, agent: string): Promise<ActivityCollectorCoverage | undefined> =>
    (await service.store.coverage(service.readScope(), SELF_COLLECTOR_ID)).find((c) => c.agent_id === agent);
  const drained = (c: SelfCollector, what: string): Promise<unknown> =>
    waitFor(what, () => (c.stats().queued === 0 ? true : undefined), {
      deadlineMs: DEADLINE_MS.process,
      intervalMs: 50,
      lastState: () => JSON.stringify(c.stats()),
    });

  test('batches per scope, sequences from 1, and a restarted collector numbers on without a jump', async () => {
    const { store, service } = await open(await server.createDatabase());
    try {
      const first = new SelfCollector({ service, logger, instanceOf: (a) => (a === 'agent-a' ? 'i-a' : undefined) });
      await first.start();
      for (let i = 0; i < 250; i++) first.record(draft(i % 5 === 0 ? 'agent-b' : 'agent-a'));
      await drained(first, 'the first 250 events stored');
      await first.stop();
      assert.deepEqual(first.stats(), { recorded: 250, dropped: 0, refused: 0, queued: 0 });
      const a = await coverageOf(service, 'agent-a');
      const b = await coverageOf(service, 'agent-b');
      assert.deepEqual([a?.instance_id, a?.first_sequence, a?.last_sequence, a?.event_count], ['i-a', 1, 200, 200]);
      assert.deepEqual(
        [b?.instance_id, b?.first_sequence, b?.last_sequence, b?.event_count],
        ['agent-b', 1, 50, 50],
        'instance = agent id when unknown',
      );

      // A restart: a new collector on the same store.
      const second = new SelfCollector({ service, logger, instanceOf: (x) => (x === 'agent-a' ? 'i-a' : undefined) });
      await second.start();
      second.record(draft('agent-a'));
      second.record(draft('agent-a'));
      await second.stop();
      assert.equal(second.stats().recorded, 2);
      const after = await coverageOf(service, 'agent-a');
      assert.deepEqual([after?.last_sequence, after?.event_count, after?.jump_count, after?.sequence_gaps], [202, 202, 0, []]);
      const page = await store.events(service.readScope({ agent_id: 'agent-a' }), { limit: 5000 });
      assert.deepEqual(
        page.events.map((e) => e.integrity.collector_sequence),
        Array.from({ length: 202 }, (_, i) => i + 1),
        'every sequence once, in order',
      );
    } finally {
      await store.close();
    }
  });

  test('a store outage: retried with backoff, the oldest dropped beyond the bound, the drop a recorded gap', async () => {
    const url = await server.createDatabase();
    const dbName = new URL(url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: url.replace(/\/[^/]+$/, '/postgres') });
    await admin.connect();
    const { store, service } = await open(url);
    try {
      const c = new SelfCollector({ service, logger, maxQueuedEvents: 5, maxRetryDelayMs: 400 });
      await c.start();
      c.record(draft('agent-x'));
      c.record(draft('agent-x'));
      await drained(c, 'the events before the outage stored');

      // The database refuses new connections and its open ones are cut.
      await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS false`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName]);
      for (let i = 0; i < 8; i++) c.record(draft('agent-x'));
      assert.equal(c.stats().dropped, 3, 'the queue keeps 5: the 3 oldest went');
      // Let a few flushes fail, then bring the database back.
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(c.stats().recorded, 2);
      await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`);
      await drained(c, 'the queued events stored once the database is back');
      await c.stop();
      assert.deepEqual(c.stats(), { recorded: 7, dropped: 3, refused: 0, queued: 0 });
      const cov = await coverageOf(service, 'agent-x');
      assert.deepEqual(
        cov?.sequence_gaps.map((g) => [g.first_missing_sequence, g.last_missing_sequence]),
        [[3, 5]],
        'sequences 3-5 were dropped: a recorded gap',
      );
      assert.deepEqual([cov?.event_count, cov?.last_sequence, cov?.durable_through_sequence], [7, 10, 10]);
    } finally {
      await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`).catch(() => undefined);
      await admin.end();
      await store.close();
    }
  });
});
