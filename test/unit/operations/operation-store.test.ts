import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OperationProgress } from '../../../src/core/operation-state.js';
import { registerOperationRoutes } from '../../../src/operations/routes.js';
import { SvcError } from '../../../src/core/errors.js';
import { inject } from '../../../src/http/inject.js';
import { Router } from '../../../src/http/router.js';
import { OperationStore } from '../../../src/operations/operation-store.js';
import { OperationTracker, newOperationId } from '../../../src/operations/operation-tracker.js';

function progress(id = newOperationId(), now?: () => number): OperationProgress {
  return new OperationProgress({ id, type: 'vm_restart', target: 'agent-a', ...(now !== undefined ? { now } : {}) });
}

describe('OperationStore', () => {
  test('snapshots arriving out of order never move an operation backwards; finished is final', () => {
    const store = new OperationStore();
    const o = progress();
    const pending = o.snapshot();
    o.start();
    const running = o.snapshot();
    o.progress(40);
    const at40 = o.snapshot();
    assert.equal(store.upsert(running), true);
    assert.equal(store.upsert(pending), false, 'older seq ignored');
    assert.equal(store.upsert(at40), true);
    assert.equal(store.get(o.id)?.progressPercent, 40);
    o.complete({ vm: { name: 'agent-a', state: 'running' } });
    assert.equal(store.upsert(o.snapshot()), true);
    assert.equal(store.upsert({ ...at40, seq: 999 }), false, 'nothing replaces a finished operation');
    assert.equal(store.json(o.id)?.status, 'completed');
  });

  test('finished operations are purged after the retention; unfinished ones never', () => {
    let now = 1_000_000;
    const store = new OperationStore({ retentionMs: 60_000, now: () => now });
    const done = progress(undefined, () => now);
    done.start();
    done.complete({});
    const running = progress(undefined, () => now);
    running.start();
    store.upsert(done.snapshot());
    store.upsert(running.snapshot());
    now += 59_999;
    assert.equal(store.purge(), 0);
    now += 1;
    assert.equal(store.purge(), 1);
    assert.equal(store.get(done.id), undefined);
    assert.ok(store.get(running.id));
    now += 10 * 3_600_000;
    assert.equal(store.purge(), 0);
  });

  test('over maxOperations the oldest finished operation is evicted first', () => {
    let now = 0;
    const store = new OperationStore({ maxOperations: 2, now: () => now });
    const a = progress('op-a', () => now++);
    a.start();
    a.complete({});
    const b = progress('op-b', () => now++);
    b.start();
    b.complete({});
    store.upsert(a.snapshot());
    store.upsert(b.snapshot());
    store.upsert(progress('op-c').snapshot());
    assert.equal(store.get('op-a'), undefined);
    assert.ok(store.get('op-b') && store.get('op-c'));
  });

  test('waitFor resolves on completion, rejects for unknown ids, on timeout and on abort', async () => {
    const store = new OperationStore();
    const o = progress();
    store.upsert(o.snapshot());
    const waiting = store.waitFor(o.id);
    o.start();
    store.upsert(o.snapshot());
    o.fail({ code: 'VM_NOT_RUNNING', message: 'no' });
    store.upsert(o.snapshot());
    assert.equal((await waiting).status, 'failed');
    assert.equal((await store.waitFor(o.id)).status, 'failed', 'already finished: at once');
    await assert.rejects(store.waitFor('op-nope'), (e: SvcError) => e.code === 'OPERATION_NOT_FOUND');
    const p = progress();
    store.upsert(p.snapshot());
    // The store's timers are unref'd (they must not hold a server open): keep this test alive.
    const keepAlive = setTimeout(() => undefined, 5000);
    await assert.rejects(store.waitFor(p.id, { timeoutMs: 20 }), (e: SvcError) => e.code === 'server.timeout');
    clearTimeout(keepAlive);
    const ac = new AbortController();
    const aborted = store.waitFor(p.id, { signal: ac.signal });
    ac.abort(new SvcError('server.not_ready', 'stopping'));
    await assert.rejects(aborted, (e: SvcError) => e.code === 'server.not_ready');
  });
});

describe('OperationTracker and GET /api/v1/operations/{id}', () => {
  test('a main-thread operation moves through the machine and is readable at every step', async () => {
    const store = new OperationStore();
    const ops = new OperationTracker(store);
    const router = new Router();
    registerOperationRoutes(router, { operations: ops });
    const h = ops.begin('vm_create', 'agent-x');
    assert.match(h.id, /^op-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const get = async (): Promise<Record<string, unknown>> => {
      const r = await inject(router, { method: 'GET', url: `/api/v1/operations/${h.id}` });
      assert.equal(r.status, 200);
      return r.json() as Record<string, unknown>;
    };
    assert.equal((await get())['status'], 'pending');
    h.start();
    h.progress(55);
    assert.deepEqual([(await get())['status'], (await get())['progress_percent']], ['running', 55]);
    const waited = ops.waitFor(h.id);
    h.complete({ vm: { name: 'agent-x', state: 'running' } });
    assert.equal((await waited).status, 'completed');
    const final = await get();
    assert.equal(final['progress_percent'], 100);
    assert.deepEqual(final['result'], { vm: { name: 'agent-x', state: 'running' } });

    const f = ops.begin('vm_delete', 'agent-y');
    f.start();
    f.fail(new SvcError('VM_RUNNING', 'still running'));
    assert.deepEqual([ops.get(f.id)?.error, ops.get(f.id)?.error_code], ['still running', 'VM_RUNNING']);
    f.fail(new Error('hidden'));
    assert.equal(ops.get(f.id)?.error, 'still running', 'a second failure changes nothing');

    const missing = await inject(router, { method: 'GET', url: '/api/v1/operations/op-nope' });
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.json(), { error: { code: 'OPERATION_NOT_FOUND', message: "operation 'op-nope' not found" } });
  });

  test('a refused operation (a reprovision that cannot be queued) is recorded failed at once, with its error code', async () => {
    const store = new OperationStore();
    const ops = new OperationTracker(store);
    const router = new Router();
    registerOperationRoutes(router, { operations: ops });
    const op = ops.refuse('vm_create', 'agent-nobody', new SvcError('VM_NOT_FOUND', "no VM runs agent 'agent-nobody'"));
    const r = await inject(router, { method: 'GET', url: `/api/v1/operations/${op.id}` });
    assert.equal(r.status, 200);
    const json = r.json() as Record<string, unknown>;
    assert.deepEqual(
      [json['type'], json['status'], json['target'], json['progress_percent'], json['error'], json['error_code']],
      ['vm_create', 'failed', 'agent-nobody', 0, "no VM runs agent 'agent-nobody'", 'VM_NOT_FOUND'],
    );
    assert.ok(typeof json['completed_at'] === 'string' && !('result' in json));
    assert.equal((await ops.waitFor(op.id)).status, 'failed');
  });
});
