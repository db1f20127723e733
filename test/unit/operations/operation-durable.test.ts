/**
 * The one operations store on its file (src/operations/operation-db.ts): a restart is a new store
 * on the same directory. And GET /api/v2/admin/operations/{id} beside the v1 route.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import pino from 'pino';
import { authComponent } from '../../../src/auth/component.js';
import { loadConfig } from '../../../src/config/load.js';
import { startServer } from '../../../src/main.js';
import { operationsComponent, OPERATIONS_DIR } from '../../../src/operations/component.js';
import { OperatorIdentity, type RolesTable } from '../../../src/auth/operator-identity.js';
import { SvcError } from '../../../src/core/errors.js';
import { OperationProgress } from '../../../src/core/operation-state.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { OperationDb, OPERATIONS_DB_FILE } from '../../../src/operations/operation-db.js';
import { OperationStore, RESTARTED_ERROR, type OperationStoreOptions } from '../../../src/operations/operation-store.js';
import { OperationTracker } from '../../../src/operations/operation-tracker.js';
import { adminOperationLocation, registerAdminOperationRoutes, registerOperationRoutes } from '../../../src/operations/routes.js';

let dir = '';
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sandboxd-ops-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A store on `dir` (a "process"): its file, its tracker. */
function open(opts: Omit<OperationStoreOptions, 'db'> = {}, onCorrupt?: (what: string, id: string, reason: string) => void) {
  const db = new OperationDb(dir, onCorrupt === undefined ? {} : { onCorrupt });
  const store = new OperationStore({ ...opts, db });
  return { db, store, ops: new OperationTracker(store) };
}

describe('durable OperationStore', () => {
  test('a restart reads back finished operations as they were; pending and running ones come back failed server.restarted', () => {
    const first = open();
    const done = first.ops.begin('vm_create', 'agent-a');
    done.start();
    done.progress(50);
    done.complete({ vm: { name: 'agent-a', state: 'running' } });
    const broken = first.ops.begin('vm_delete', 'agent-b');
    broken.start();
    broken.fail(new SvcError('VM_RUNNING', 'still running'));
    const refused = first.ops.refuse('vm_create', 'agent-nobody', new SvcError('VM_NOT_FOUND', 'no VM'));
    const running = first.ops.begin('checkpoint_create', 'agent-c');
    running.start();
    running.progress(40);
    first.store.flush();
    const pending = first.ops.begin('warm_pool_handoff', 'pool-1');
    const before = [done.json(), broken.json(), refused];
    const runningSeq = first.store.get(running.id)?.seq ?? 0;
    // The first process "dies" here: its file is let go without close()'s flush.
    first.db.close();

    const second = open();
    assert.deepEqual(
      before.map((o) => second.ops.get(o.id)),
      before,
      'finished operations read back field for field',
    );
    for (const [h, progress] of [
      [running, 40],
      [pending, 0],
    ] as const) {
      const op = second.ops.get(h.id);
      assert.ok(op !== null);
      assert.equal(op.status, 'failed');
      assert.equal(op.error_code, 'server.restarted');
      assert.equal(op.error, RESTARTED_ERROR.message);
      assert.equal(op.progress_percent, progress, 'the progress it had reached is kept');
      assert.ok(typeof op.completed_at === 'string' && op.result === undefined);
      assert.equal(op.created_at, h.json().created_at);
    }
    assert.equal(second.store.get(running.id)?.seq, runningSeq + 1, 'seq continues across the restart');
    // The dead process's last copy cannot move it back, nor can anything replace a finished one.
    const last = first.store.get(running.id)!;
    assert.equal(second.store.upsert(last), false);
    assert.equal(second.store.upsert({ ...last, status: 'completed', result: {}, progressPercent: 100, seq: 999 }), false);
    assert.equal(second.ops.get(running.id)?.status, 'failed');

    // A third start reads the failure as written: it is not failed again.
    second.store.close();
    const third = open();
    assert.deepEqual(third.ops.get(running.id), second.ops.get(running.id));
    third.store.close();
  });

  test('waitFor on an operation the restart failed resolves at once', async () => {
    const first = open();
    const h = first.ops.begin('vm_restart', 'agent-a');
    h.start();
    const second = open();
    assert.equal((await second.ops.waitFor(h.id)).error_code, 'server.restarted');
    second.store.close();
    first.store.close();
  });

  test('creation and status changes are on disk when upsert returns; progress alone is coalesced until flush, a status change or close', () => {
    const first = open({ progressFlushMs: 3_600_000 });
    const reader = (): number | undefined => {
      const peek = new OperationDb(dir);
      const got = peek.loadAll().find((s) => s.id === h.id)?.progressPercent;
      peek.close();
      return got;
    };
    const h = first.ops.begin('vm_create', 'agent-a');
    h.start();
    assert.equal(reader(), 0);
    for (let p = 1; p <= 60; p++) h.progress(p);
    assert.equal(reader(), 0, 'sixty progress ticks: no write yet');
    first.store.flush();
    assert.equal(reader(), 60);
    h.progress(70);
    h.complete({});
    assert.equal(reader(), 100, 'the terminal snapshot is written at once');
    const k = first.ops.begin('vm_create', 'agent-b');
    k.start();
    k.progress(33);
    first.store.close();
    const again = open();
    assert.equal(again.store.get(k.id)?.progressPercent, 33, 'close() writes what was pending');
    again.store.close();
  });

  test('retention holds across restarts: expired finished operations are neither loaded nor kept in the file', () => {
    let now = 10_000_000;
    const first = open({ retentionMs: 60_000, now: () => now });
    const mk = (target: string): OperationProgress =>
      new OperationProgress({ id: `op-${target}`, type: 'vm_delete', target, now: () => now });
    const old = mk('old');
    old.start();
    old.complete({});
    first.store.upsert(old.snapshot());
    now += 30_000;
    const young = mk('young');
    young.start();
    young.complete({});
    first.store.upsert(young.snapshot());
    first.store.close();

    now += 30_000; // old finished 60 s ago: due; young 30 s ago
    const second = open({ retentionMs: 60_000, now: () => now });
    assert.equal(second.store.get('op-old'), undefined);
    assert.ok(second.store.get('op-young'));
    now += 30_000;
    assert.equal(second.store.purge(), 1);
    second.store.close();
    const raw = new Database(join(dir, OPERATIONS_DB_FILE));
    assert.deepEqual(raw.prepare('SELECT id FROM operations').all(), [], 'the purge deleted the rows too');
    raw.close();
  });

  test('over maxOperations at load, the oldest finished go (from the file too)', () => {
    let now = 1_000;
    const first = open({ now: () => now });
    for (const t of ['a', 'b', 'c']) {
      const o = new OperationProgress({ id: `op-${t}`, type: 'vm_delete', target: `agent-${t}`, now: () => now });
      now += 10;
      o.start();
      o.complete({});
      first.store.upsert(o.snapshot());
    }
    first.store.close();
    const second = open({ maxOperations: 2, now: () => now });
    assert.equal(second.store.size, 2);
    assert.equal(second.store.get('op-a'), undefined);
    second.store.close();
    const peek = new OperationDb(dir);
    assert.deepEqual(
      peek
        .loadAll()
        .map((s) => s.id)
        .sort(),
      ['op-b', 'op-c'],
    );
    peek.close();
  });

  test('the file: 0600 in a 0700 directory, WAL; a corrupt row is skipped and deleted; a newer schema refuses to open', async () => {
    const first = open();
    first.ops.begin('vm_create', 'agent-a');
    first.store.close();
    assert.equal((await stat(dir)).mode & 0o777, 0o700);
    assert.equal((await stat(join(dir, OPERATIONS_DB_FILE))).mode & 0o777, 0o600);
    const raw = new Database(join(dir, OPERATIONS_DB_FILE));
    assert.equal(raw.pragma('journal_mode', { simple: true }), 'wal');
    raw
      .prepare("INSERT INTO operations (id, status, completed_at_ms, seq, record) VALUES ('op-bad', 'running', NULL, 1, '{not json')")
      .run();
    raw
      .prepare(
        'INSERT INTO operations (id, status, completed_at_ms, seq, record) VALUES (\'op-bad2\', \'running\', NULL, 1, \'{"v":1,"id":"op-bad2","type":"nope"}\')',
      )
      .run();
    raw.close();
    const corrupt: string[] = [];
    const second = open({}, (what, id) => corrupt.push(`${what}:${id}`));
    assert.deepEqual(corrupt.sort(), ['row:op-bad', 'row:op-bad2']);
    assert.equal(second.store.size, 1);
    second.store.close();
    const third: string[] = [];
    open({}, (what, id) => third.push(`${what}:${id}`)).store.close();
    assert.deepEqual(third, [], 'deleted, so reported once');

    const newer = new Database(join(dir, OPERATIONS_DB_FILE));
    newer.pragma('user_version = 7');
    newer.close();
    assert.throws(() => new OperationDb(dir), /version 7, newer than this sandboxd knows \(1\)/);
  });

  test('a file that is not a database is set aside (kept for inspection) and a fresh one started', async () => {
    await writeFile(join(dir, OPERATIONS_DB_FILE), 'this is not an SQLite file at all, just text long enough to have a header'.repeat(20));
    const reports: string[] = [];
    const s = open({}, (what, id) => reports.push(`${what}:${id}`));
    assert.equal(s.store.size, 0);
    const h = s.ops.begin('vm_create', 'agent-a');
    s.store.close();
    assert.equal(reports.length, 1);
    assert.match(reports[0] ?? '', /^file:.*operations\.db\.corrupt-\d+$/);
    const aside = (await readdir(dir)).filter((f) => f.includes('.corrupt-'));
    assert.equal(aside.length, 1);
    assert.match(await readFile(join(dir, aside[0] ?? ''), 'utf8'), /^this is not an SQLite file/);
    const again = open();
    assert.ok(again.ops.get(h.id), 'the fresh file works');
    again.store.close();
  });
});

describe('GET /api/v2/admin/operations/{id}', () => {
  const TD = 'sandboxd.test';
  function routes(table: RolesTable = { ok: true, roles: new Map() }) {
    const ops = new OperationTracker(new OperationStore());
    const router = new Router();
    registerOperationRoutes(router, { operations: ops });
    registerAdminOperationRoutes(router, {
      operations: ops,
      identity: new OperatorIdentity({ trustDomain: TD, localRole: 'admin', roles: () => table }),
    });
    return { ops, router };
  }

  test('the v1 answer field for field plus links.self; the same operation on both routes', async () => {
    const { ops, router } = routes();
    const h = ops.begin('checkpoint_create', 'agent-a');
    h.start();
    h.complete({ checkpoint_id: 'cp-1' });
    assert.equal(adminOperationLocation(h.id), `/api/v2/admin/operations/${h.id}`);
    const v1 = await inject(router, { method: 'GET', url: `/api/v1/operations/${h.id}` });
    const v2 = await inject(router, { method: 'GET', url: adminOperationLocation(h.id) });
    assert.equal(v2.status, 200);
    assert.equal(v2.headers['cache-control'], 'no-store');
    assert.deepEqual(v2.json(), { ...(v1.json() as object), links: { self: adminOperationLocation(h.id) } });
    assert.deepEqual((v2.json() as Record<string, unknown>)['result'], { checkpoint_id: 'cp-1' });
    // A viewer operator over mTLS may read it (admin.read).
    const peer = { transport: 'mtls', spiffeId: `spiffe://${TD}/operator/vera`, fingerprint256: 'AB' } as const;
    assert.equal((await inject(router, { method: 'GET', url: adminOperationLocation(h.id), peer })).status, 200);
  });

  test('unknown ids are 404 operation.not_found; malformed or huge ones 400 without the input echoed; an unresolved caller 403', async () => {
    const { router } = routes();
    const missing = await inject(router, { method: 'GET', url: '/api/v2/admin/operations/op-nope' });
    assert.equal(missing.status, 404);
    assert.equal((missing.json() as { error: { code: string } }).error.code, 'operation.not_found');
    const huge = `op-${'x'.repeat(5000)}`;
    const big = await inject(router, { method: 'GET', url: `/api/v2/admin/operations/${huge}` });
    assert.equal(big.status, 400);
    assert.equal((big.json() as { error: { code: string } }).error.code, 'request.invalid');
    assert.ok(big.text.length < 400 && !big.text.includes('xxxxxxxxxx'), big.text);
    const odd = await inject(router, { method: 'GET', url: `/api/v2/admin/operations/${encodeURIComponent('op-<script>')}` });
    assert.equal(odd.status, 400);
    assert.ok(!odd.text.includes('<script>'));

    const locked = routes({ ok: false, reason: 'the roles file is not valid JSON' });
    const h = locked.ops.begin('vm_create', 'agent-a');
    const peer = { transport: 'mtls', spiffeId: `spiffe://${TD}/operator/alice`, fingerprint256: 'AB' } as const;
    const denied = await inject(locked.router, { method: 'GET', url: adminOperationLocation(h.id), peer });
    assert.equal(denied.status, 403);
    assert.equal((denied.json() as { error: { code: string } }).error.code, 'auth.permission_denied');
  });
});

describe('the operations component', () => {
  const start = () =>
    startServer(loadConfig({ SVC_STATE_DIR: dir, LOG_LEVEL: 'silent' }), pino({ level: 'silent' }), {
      components: [authComponent, operationsComponent()],
    });

  test('provides the one store under $SVC_STATE_DIR/operations with both routes; a restart keeps what it held', async () => {
    const first = await start();
    const h = first.service('operations').begin('warm_pool_create', 'pool-a');
    h.start();
    h.complete({ slots: 2 });
    const before = await inject(first.router, { method: 'GET', url: adminOperationLocation(h.id) });
    assert.equal(before.status, 200);
    await first.stop();
    const second = await start();
    const after = await inject(second.router, { method: 'GET', url: adminOperationLocation(h.id) });
    assert.deepEqual(after.json(), before.json());
    assert.equal((await inject(second.router, { method: 'GET', url: `/api/v1/operations/${h.id}` })).status, 200);
    await second.stop();
    assert.ok((await readdir(join(dir, OPERATIONS_DIR))).includes(OPERATIONS_DB_FILE));
  });

  test('a file of a newer schema stops start-up naming SVC_STATE_DIR and the version', async () => {
    const db = new OperationDb(join(dir, OPERATIONS_DIR));
    db.close();
    const raw = new Database(join(dir, OPERATIONS_DIR, OPERATIONS_DB_FILE));
    raw.pragma('user_version = 2');
    raw.close();
    await assert.rejects(
      start(),
      /SVC_STATE_DIR: the operations file under .* cannot be opened: .*version 2, newer than this sandboxd knows/,
    );
  });
});
