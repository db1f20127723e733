import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  OPERATION_STATUSES,
  OPERATION_STATUS_TABLE,
  OperationProgress,
  operationJson,
  operationStatusTableMarkdown,
} from '../../../src/core/operation-state.js';

function op(now = (): number => 1_700_000_000_000): OperationProgress {
  return new OperationProgress({ id: 'op-1', type: 'vm_create', target: 'agent-a', now });
}

describe('operation state machine', () => {
  test('a new operation is pending at 0 % with no completed_at, result or error', () => {
    const j = operationJson(op().snapshot());
    assert.deepEqual(j, {
      id: 'op-1',
      type: 'vm_create',
      status: 'pending',
      target: 'agent-a',
      created_at: '2023-11-14T22:13:20.000Z',
      progress_percent: 0,
    });
  });

  test('pending → running → completed: progress climbs, ends at 100 with the result', () => {
    let t = 1_700_000_000_000;
    const o = op(() => t);
    assert.equal(o.progress(50), false, 'no progress while pending');
    assert.equal(o.start(), true);
    assert.equal(o.progress(40), true);
    assert.equal(o.progress(30), false, 'never lowered');
    assert.equal(o.progress(100), true);
    assert.equal(o.snapshot().progressPercent, 99, 'only completion reaches 100');
    t += 5000;
    assert.equal(o.complete({ vm: { name: 'agent-a', state: 'running' } }), true);
    const j = operationJson(o.snapshot());
    assert.equal(j.status, 'completed');
    assert.equal(j.progress_percent, 100);
    assert.equal(j.completed_at, '2023-11-14T22:13:25.000Z');
    assert.deepEqual(j.result, { vm: { name: 'agent-a', state: 'running' } });
    assert.equal(j.error, undefined);
    assert.equal(o.fail({ code: 'server.internal', message: 'x' }), false, 'completed is final');
  });

  test('failure keeps the progress reached and carries the error (and its code)', () => {
    const o = op();
    o.start();
    o.progress(70);
    assert.equal(o.fail({ code: 'PROVISIONING_ERROR', message: 'agent did not connect' }), true);
    const j = operationJson(o.snapshot());
    assert.equal(j.status, 'failed');
    assert.equal(j.progress_percent, 70);
    assert.equal(j.error, 'agent did not connect');
    assert.equal(j.error_code, 'PROVISIONING_ERROR');
    assert.equal(j.result, undefined);
    assert.equal(typeof j.completed_at, 'string');
    assert.equal(o.start(), false);
    assert.equal(o.complete({}), false);
  });

  test('a pending operation can be cancelled (failed) but not completed', () => {
    const o = op();
    assert.equal(o.complete({}), false);
    assert.equal(o.fail({ code: 'actor.shard_restarted', message: 'lost' }, 'cancelled'), true);
    assert.equal(o.status, 'failed');
  });

  test('the table: completed and failed are final; the README table lists every move', () => {
    assert.deepEqual(OPERATION_STATUS_TABLE.completed, []);
    assert.deepEqual(OPERATION_STATUS_TABLE.failed, []);
    const md = operationStatusTableMarkdown();
    for (const [from, tos] of Object.entries(OPERATION_STATUS_TABLE))
      for (const to of tos) assert.ok(md.includes(`| ${from} | ${to} |`), `${from}->${to}`);
  });

  test('any sequence of calls keeps the invariants (property)', () => {
    const call = fc.oneof(
      fc.constant({ k: 'start' as const }),
      fc.record({ k: fc.constant('progress' as const), p: fc.integer({ min: -50, max: 200 }) }),
      fc.constant({ k: 'complete' as const }),
      fc.constant({ k: 'fail' as const }),
    );
    fc.assert(
      fc.property(fc.array(call, { maxLength: 30 }), (calls) => {
        const o = op();
        let lastSeq = o.snapshot().seq;
        let lastProgress = 0;
        for (const c of calls) {
          const changed =
            c.k === 'start'
              ? o.start()
              : c.k === 'progress'
                ? o.progress(c.p)
                : c.k === 'complete'
                  ? o.complete({ ok: true })
                  : o.fail({ code: 'server.internal', message: 'e' });
          const s = o.snapshot();
          assert.ok(OPERATION_STATUSES.includes(s.status));
          assert.equal(s.seq > lastSeq, changed, 'seq grows exactly when something changed');
          assert.ok(s.progressPercent >= lastProgress && s.progressPercent >= 0 && s.progressPercent <= 100);
          assert.equal(s.progressPercent === 100, s.status === 'completed');
          assert.equal(s.completedAtMs !== null, s.status === 'completed' || s.status === 'failed');
          assert.equal(s.result !== null, s.status === 'completed');
          assert.equal(s.error !== null, s.status === 'failed');
          lastSeq = s.seq;
          lastProgress = s.progressPercent;
        }
      }),
    );
  });
});
