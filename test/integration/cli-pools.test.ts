/**
 * sbx checkpoint / sbx pool against the real server (libvirt test driver, local agents, bootstrap
 * enrollment): a deferred-enrollment VM checkpointed, pooled and handed off, each with --json
 * output checked, a retry with the same --idempotency-key answered from the first, and the exit
 * code of an empty pool.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Checkpoint, WarmPool } from '../../src/wire/checkpoints.js';
import { runSbx, sbxJson, startCliServer, vmName, type CliServer } from './cli-harness.js';

let srv: CliServer;
before(async () => {
  srv = await startCliServer();
});
after(async () => {
  await srv?.stop();
});

interface Op {
  id: string;
  type: string;
  status: string;
  result?: { vm?: { name: string }; instance_id?: string; agent?: { status: string } };
}

describe('sbx checkpoint and sbx pool', () => {
  test('vm create --deferred-enrollment, checkpoint create, pool create, pool ls, pool handoff, checkpoint ls', async () => {
    const vm = vmName('cli-pool');
    const created = await sbxJson<Op>(srv, ['vm', 'create', vm, '--deferred-enrollment', '--profile', 'basic', '--memory-mb', '256']);
    assert.equal(created.status, 'completed');

    const ck = await sbxJson<Op>(srv, ['checkpoint', 'create', vm, 'cli-ck-1', '--idempotency-key', 'cli-ck-key']);
    assert.deepEqual([ck.type, ck.status], ['checkpoint_create', 'completed']);
    const retry = await runSbx(srv, ['checkpoint', 'create', vm, 'cli-ck-1', '--idempotency-key', 'cli-ck-key', '--no-wait', '--json']);
    assert.equal(retry.code, 0, retry.stderr);
    assert.equal((JSON.parse(retry.stdout) as { operation: { id: string } }).operation.id, ck.id, 'the retry replayed the first answer');

    const pooled = await sbxJson<Op>(srv, ['pool', 'create', 'cli-pool', 'cli-ck-1', '--target-size', '0']);
    assert.deepEqual([pooled.type, pooled.status], ['warm_pool_create', 'completed']);
    const pools = await sbxJson<WarmPool[]>(srv, ['pool', 'ls']);
    const mine = pools.find((p) => p.pool === 'cli-pool');
    assert.deepEqual(mine && [mine.ready_slots, mine.target_size, mine.checkpoint_ids], [1, 0, ['cli-ck-1']]);
    const table = await runSbx(srv, ['pool', 'ls']);
    assert.match(table.stdout, /cli-pool\s+1\s+0/);

    const handed = await sbxJson<Op>(srv, ['pool', 'handoff', 'cli-pool']);
    assert.deepEqual(
      [handed.type, handed.status, handed.result?.vm?.name, handed.result?.agent?.status],
      ['warm_pool_handoff', 'completed', vm, 'Ready'],
    );
    const human = await runSbx(srv, ['pool', 'handoff', 'cli-pool']);
    assert.notEqual(human.code, 0);
    assert.match(human.stderr, /warm_pool\.empty/);

    const cks = await sbxJson<Checkpoint[]>(srv, ['checkpoint', 'ls']);
    assert.equal(cks.find((c) => c.checkpoint_id === 'cli-ck-1')?.status, 'consumed');
  });
});
