/**
 * The PostgreSQL activity store against a real PostgreSQL (Debian's package, started by
 * test/support/postgres.ts): the store contract, each test in a fresh database, and what only
 * this backend has: migrations, concurrent opens, the URL's password, a database that goes away.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { validateBatch } from '../../src/activity/record.js';
import { PostgresActivityStore } from '../../src/activity/postgres-store.js';
import { ACTIVITY_PG_MIGRATIONS } from '../../src/activity/postgres-schema.js';
import { SvcError } from '../../src/core/errors.js';
import { activityStoreContract } from '../support/activity-store-contract.js';
import { kTestScope, TestCollector } from '../support/activity-events.js';
import { closedPort } from '../support/ports.js';
import { startPostgres, type TestPostgres } from '../support/postgres.js';

let server: TestPostgres | undefined;
const db = (): TestPostgres => server ?? assert.fail('PostgreSQL did not start');

before(async () => {
  server = await startPostgres();
});
after(async () => {
  await server?.stop();
});

activityStoreContract('postgres', async () => PostgresActivityStore.open(await db().createDatabase()));

const readScope = {
  tenant_id: kTestScope.tenant_id,
  host_id: kTestScope.host_id,
  instance_id: kTestScope.instance_id,
  agent_id: kTestScope.agent_id,
};

async function ingestBatch(store: PostgresActivityStore, c: TestCollector, n: number) {
  return store.ingest(c.scope, validateBatch({ events: c.batch(n) }, c.scope));
}

async function appliedVersions(url: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ version: number }>('SELECT version FROM activity_schema_migrations ORDER BY version');
    return rows.map((r) => r.version);
  } finally {
    await client.end();
  }
}

async function unavailable(p: Promise<unknown>): Promise<SvcError> {
  try {
    await p;
  } catch (err) {
    assert.ok(
      err instanceof SvcError && err.code === 'activity.store_unavailable',
      `expected activity.store_unavailable, got ${String(err)}`,
    );
    return err;
  }
  assert.fail('expected activity.store_unavailable, but it succeeded');
}

void describe('PostgreSQL activity store', () => {
  void test('servers opening one database at once migrate it once; reopening keeps the schema and the rows', async () => {
    const url = await db().createDatabase();
    const stores = await Promise.all(Array.from({ length: 5 }, () => PostgresActivityStore.open(url)));
    try {
      assert.deepEqual(
        await appliedVersions(url),
        ACTIVITY_PG_MIGRATIONS.map((m) => m.version),
      );
      const c = new TestCollector(kTestScope);
      await ingestBatch(stores[0]!, c, 3);
      const page = await stores[4]!.events(readScope, { limit: 10 });
      assert.equal(page.events.length, 3, 'one store sees what another stored');
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    const again = await PostgresActivityStore.open(url);
    try {
      assert.deepEqual(
        await appliedVersions(url),
        ACTIVITY_PG_MIGRATIONS.map((m) => m.version),
        'no step applied twice',
      );
      assert.equal((await again.events(readScope, { limit: 10 })).events.length, 3);
    } finally {
      await again.close();
    }
  });

  void test('a schema newer than this build is refused, not written to', async () => {
    const url = await db().createDatabase();
    await (await PostgresActivityStore.open(url)).close();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query("INSERT INTO activity_schema_migrations (version, description) VALUES (999, 'from the future')");
    await client.end();
    const err = await unavailable(PostgresActivityStore.open(url));
    assert.match(err.message, /version 999, newer/);
  });

  void test('the location names the database without its password, and so do the errors', async () => {
    // Loopback is trusted, so a password is accepted and ignored: the store opens all the same.
    const url = new URL(await db().createDatabase());
    url.password = 'hunter2-s3cret';
    const withQuery = `postgres://postgres@127.0.0.1:${db().port}${url.pathname}?password=other-s3cret&application_name=x`;
    for (const [given, location] of [
      [url.toString(), `postgres://postgres@127.0.0.1:${db().port}${url.pathname}`],
      [withQuery, `postgres://postgres@127.0.0.1:${db().port}${url.pathname}?application_name=x`],
    ] as const) {
      const store = await PostgresActivityStore.open(given);
      try {
        assert.equal(store.kind, 'postgres');
        assert.equal(store.location, location);
      } finally {
        await store.close();
      }
    }
    const refused = await unavailable(PostgresActivityStore.open(`postgres://postgres:hunter2-s3cret@127.0.0.1:${await closedPort()}/x`));
    assert.ok(!refused.message.includes('hunter2-s3cret'), refused.message);
    const notAUrl = await unavailable(PostgresActivityStore.open('postgres//user:hunter2-s3cret@host'));
    assert.ok(!notAUrl.message.includes('hunter2-s3cret'), notAUrl.message);
  });

  void test('a database that goes away: every call is activity.store_unavailable, and the process lives on', async () => {
    const own = await startPostgres();
    let store: PostgresActivityStore | undefined;
    try {
      store = await PostgresActivityStore.open(own.url);
      const c = new TestCollector(kTestScope);
      await ingestBatch(store, c, 2);
      // Idle pooled connections break while nobody is asking: they must not end this process.
      await own.stop();
      await unavailable(ingestBatch(store, c, 2));
      await unavailable(store.events(readScope, { limit: 10 }));
      await unavailable(store.coverage(readScope));
      await unavailable(store.prune(Date.now(), 10));
    } finally {
      await store?.close();
      await own.stop();
    }
    await unavailable(PostgresActivityStore.open(`postgres://postgres@127.0.0.1:${await closedPort()}/sandboxd`));
  });
});
