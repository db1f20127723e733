/**
 * The fleet inventory on PostgreSQL (src/fleet/postgres-inventory-store.ts) against a real
 * PostgreSQL (Debian's package, started by test/support/postgres.ts): the revision rule under 100
 * concurrent changes, what a reopen finds, one inventory per host id, a database connection cut
 * under the writer, and a real sandboxd whose SVC_ACTIVITY_STORE is a postgres:// URL answering a
 * VM create only once the workload is in the database, keeping its inventory across a restart.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import pino from 'pino';
import { fleetComponent, fleetInventoryComponent } from '../../src/fleet/component.js';
import { PostgresInventoryStore } from '../../src/fleet/postgres-inventory-store.js';
import { content, NOT_OBSERVED } from '../../src/fleet/records.js';
import { inject } from '../../src/http/inject.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import type { FleetWorkloadsResponse } from '../../src/wire/fleet.js';
import type { AdminOperation } from '../../src/wire/vms.js';
import { desired } from '../support/fleet-records.js';
import { startPostgres, type TestPostgres } from '../support/postgres.js';
import { loopbackConfig } from '../support/test-config.js';
import { DEADLINE_MS, waitFor } from '../support/wait.js';
import { uniqueName, vmServerComponents } from './vms-harness.js';

let server: TestPostgres | undefined;
const db = (): TestPostgres => server ?? assert.fail('PostgreSQL did not start');

before(async () => {
  server = await startPostgres();
});
after(async () => {
  await server?.stop();
});

/** What the database itself holds for `scope`, read on a connection of the test's own. */
async function stored(url: string, scope: string): Promise<{ revision: number; names: string[] }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const meta = await client.query<{ value: string }>("SELECT value FROM fleet_inventory_meta WHERE scope = $1 AND key = 'revision'", [
      scope,
    ]);
    const rows = await client.query<{ name: string }>('SELECT name FROM fleet_workloads WHERE scope = $1 ORDER BY name', [scope]);
    return { revision: Number(meta.rows[0]?.value ?? 0), names: rows.rows.map((r) => r.name) };
  } finally {
    await client.end();
  }
}

describe('fleet inventory on PostgreSQL', () => {
  test('100 concurrent changes take 100 increasing revisions; all are in the database once committed, and a reopen finds them', async () => {
    const url = await db().createDatabase();
    const store = await PostgresInventoryStore.open(url, 'host-a');
    const got: number[] = [];
    await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        await new Promise((r) => setTimeout(r, (i * 7) % 13));
        const rev = store.update(`agent-w${i % 10}`, (held) =>
          content(desired({ vcpus: (held?.desired?.vcpus ?? 0) + 1 }), NOT_OBSERVED, null),
        );
        assert.notEqual(rev, null);
        got.push(rev!);
      }),
    );
    assert.deepEqual(
      got,
      Array.from({ length: 100 }, (_, i) => i + 1),
      'each change took the next revision, in order',
    );
    await store.committed();
    assert.equal(store.backlog(), 0);
    assert.deepEqual(await stored(url, 'host-a'), { revision: 100, names: Array.from({ length: 10 }, (_, i) => `agent-w${i}`).sort() });
    store.markAdopted();
    await store.close();

    const again = await PostgresInventoryStore.open(url, 'host-a');
    try {
      assert.equal(again.revision(), 100);
      assert.equal(again.adopted(), true);
      assert.equal(
        again.list().reduce((n, r) => n + (r.desired?.vcpus ?? 0), 0),
        100,
        'none of the 100 increments lost',
      );
      assert.equal(
        again.update('agent-w0', () => null),
        101,
        'a removal is a change',
      );
      await again.committed();
      assert.equal((await stored(url, 'host-a')).names.includes('agent-w0'), false);
    } finally {
      await again.close();
    }
  });

  test('one inventory per host id: a second server of the same host is refused by name, another host has its own', async () => {
    const url = await db().createDatabase();
    const first = await PostgresInventoryStore.open(url, 'host-a');
    try {
      first.update('agent-only-a', () => content(desired(), NOT_OBSERVED, null));
      await first.committed();
      const withPassword = url.replace('postgres@', 'postgres:hunter2-s3cret@');
      await assert.rejects(PostgresInventoryStore.open(withPassword, 'host-a'), (err: Error) => {
        assert.match(err.message, /another sandboxd holds the fleet inventory of host 'host-a'/);
        assert.doesNotMatch(err.message, /hunter2/, 'the password is never in the message');
        return true;
      });
      const other = await PostgresInventoryStore.open(url, 'host-b');
      try {
        assert.equal(other.revision(), 0);
        assert.deepEqual(other.list(), []);
      } finally {
        await other.close();
      }
    } finally {
      await first.close();
    }
    // Closed: the host's lock is free again.
    await (await PostgresInventoryStore.open(url, 'host-a')).close();
  });

  test('connections cut under the writer: the change is retried on a new connection and lands', async () => {
    const url = await db().createDatabase();
    const store = await PostgresInventoryStore.open(url, 'host-c');
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      store.update('agent-before', () => content(desired(), NOT_OBSERVED, null));
      await store.committed();
      // Every connection of the store ends (the writer's idle one and the lock holder's).
      const cut = await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sandboxd-fleet'");
      assert.ok(cut.rowCount! >= 1);
      store.update('agent-after', () => content(desired(), NOT_OBSERVED, null));
      await store.committed();
      assert.deepEqual(await stored(url, 'host-c'), { revision: 2, names: ['agent-after', 'agent-before'] });
    } finally {
      await admin.end();
      await store.close();
    }
  });

  test('a sandboxd on it answers a VM create once the workload is in the database, and keeps the inventory across a restart', async () => {
    const url = await db().createDatabase();
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-fleet-pg-'));
    const config = loopbackConfig(dir, { SVC_ACTIVITY_STORE: url, SVC_HOST_ID: 'host-pg', SVC_HYPERVISOR_POLL_INTERVAL_MS: '60000' });
    const components = () =>
      vmServerComponents({ admin: true, beforeVms: [fleetInventoryComponent()], afterVms: [fleetComponent({ sweepIntervalMs: 0 })] });
    let sandboxd: ServerHandle | undefined = await startServer(config, pino({ level: 'silent' }), { components: components() });
    const name = uniqueName('pg');
    try {
      const req = (s: ServerHandle, method: string, path: string, body?: unknown) =>
        inject(s.router, { method, url: path, headers: {}, ...(body !== undefined ? { body } : {}) });
      const r = await req(sandboxd, 'POST', '/api/v1/vms', { name, profile: 'basic', vcpus: 1, memory_mb: 256, disk_gb: 1, start: false });
      assert.equal(r.status, 202, r.text);
      assert.ok((await stored(url, 'host-pg')).names.includes(name), 'the desired workload was in PostgreSQL when the 202 came');
      const id = (r.json() as { operation: { id: string } }).operation.id;
      const s1 = sandboxd;
      await waitFor(
        `operation ${id} finished`,
        async () => {
          const op = (await req(s1, 'GET', `/api/v1/operations/${id}`)).json() as AdminOperation;
          return op.status === 'completed' || op.status === 'failed' ? op : null;
        },
        { deadlineMs: DEADLINE_MS.endToEnd, intervalMs: 100 },
      );
      const before = (await req(sandboxd, 'GET', '/api/v2/fleet/workloads')).json() as FleetWorkloadsResponse;
      assert.equal(before.workloads.find((w) => w.name === name)?.desired?.state, 'stopped');
      await sandboxd.stop();
      sandboxd = undefined;
      assert.equal((await stored(url, 'host-pg')).revision, before.inventory_revision, 'every change was written before the stop ended');

      sandboxd = await startServer(config, pino({ level: 'silent' }), { components: components() });
      const afterRestart = (await req(sandboxd, 'GET', '/api/v2/fleet/workloads')).json() as FleetWorkloadsResponse;
      assert.ok(afterRestart.inventory_revision >= before.inventory_revision, 'the revision never goes back');
      const w = afterRestart.workloads.find((x) => x.name === name);
      assert.equal(w?.desired?.state, 'stopped');
      assert.equal(w?.lineage?.origin, 'vm_create');
    } finally {
      await sandboxd?.hypervisor.undefine(name, { force: true }).catch(() => undefined);
      await sandboxd?.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
