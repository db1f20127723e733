import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { CHECKPOINT_TABLE } from '../../../src/checkpoints/checkpoint-state.js';
import { CHECKPOINTS_DB_FILE, CheckpointStore, type VmTemplate } from '../../../src/checkpoints/checkpoint-store.js';
import { CHECKPOINT_STATUSES } from '../../../src/wire/checkpoints.js';

const template: VmTemplate = { profile: 'basic', vcpus: 1, memoryMiB: 256, diskGiB: 1 };

function withDir(fn: (dir: string) => void): () => void {
  return () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-ckstore-'));
    try {
      fn(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

function ready(store: CheckpointStore, id: string, vm = `agent-${id}`): void {
  assert.ok(store.add({ id, vm, host: 'test:///default', template }));
  assert.ok(store.move(id, ['creating'], 'ready', 'saved'));
}

describe('checkpoint store', () => {
  test('the lifecycle table names every status, and consumed and failed are final', () => {
    assert.deepEqual(Object.keys(CHECKPOINT_TABLE).sort(), [...CHECKPOINT_STATUSES].sort());
    assert.deepEqual(CHECKPOINT_TABLE.consumed, []);
    assert.deepEqual(CHECKPOINT_TABLE.failed, []);
  });

  test(
    'ids are unique; moves follow the table (a ready checkpoint cannot jump to consumed)',
    withDir((dir) => {
      const store = new CheckpointStore(dir);
      ready(store, 'a');
      assert.equal(store.add({ id: 'a', vm: 'agent-x', host: 'h', template }), false);
      assert.equal(store.move('a', ['ready'], 'consumed', 'bogus'), false);
      assert.equal(store.get('a')?.status, 'ready');
      assert.equal(store.move('a', ['reserved'], 'restoring', 'wrong_from'), false);
      assert.equal(store.move('missing', ['ready'], 'restoring', 'x'), false);
      store.close();
    }),
  );

  test(
    'a pool reserves its checkpoints; claims take the oldest slot, each once, then none',
    withDir((dir) => {
      const store = new CheckpointStore(dir);
      for (const id of ['s1', 's2', 's3']) ready(store, id);
      assert.ok(store.addPool({ name: 'p', targetSize: 3, template }, ['s1', 's2', 's3']));
      assert.equal(store.addPool({ name: 'p', targetSize: 1, template }, []), false);
      assert.deepEqual(
        store.slots('p').map((c) => c.id),
        ['s1', 's2', 's3'],
      );
      const claimed = [store.claim('p'), store.claim('p'), store.claim('p')].map((c) => c?.id);
      assert.deepEqual(claimed, ['s1', 's2', 's3']);
      assert.equal(store.claim('p'), undefined);
      assert.equal(store.pool('p')?.handoffsTotal, 3);
      assert.ok(claimed.every((id) => store.get(id ?? '')?.status === 'restoring'));
      store.close();
    }),
  );

  test(
    'everything survives a restart; a checkpoint left creating or restoring comes back failed',
    withDir((dir) => {
      const s1 = new CheckpointStore(dir);
      ready(s1, 'kept');
      ready(s1, 'cut');
      s1.move('cut', ['ready'], 'restoring', 'restore_requested');
      s1.add({ id: 'half', vm: 'agent-half', host: 'h', template });
      ready(s1, 'slot');
      s1.addPool({ name: 'p', targetSize: 2, template }, ['slot']);
      s1.close();
      const s2 = new CheckpointStore(dir);
      assert.equal(s2.get('kept')?.status, 'ready');
      assert.equal(s2.get('cut')?.status, 'failed');
      assert.match(s2.get('cut')?.error ?? '', /restarted while this checkpoint was being restored/);
      assert.equal(s2.get('half')?.status, 'failed');
      assert.deepEqual(s2.get('kept')?.template, template);
      assert.deepEqual(
        s2.slots('p').map((c) => c.id),
        ['slot'],
      );
      assert.equal(s2.pool('p')?.targetSize, 2);
      s2.close();
    }),
  );

  test(
    'a file written by a newer sandboxd is refused',
    withDir((dir) => {
      new CheckpointStore(dir).close();
      const db = new Database(join(dir, CHECKPOINTS_DB_FILE));
      db.pragma('user_version = 7');
      db.close();
      assert.throws(() => new CheckpointStore(dir), /schema version 7, newer/);
    }),
  );
});
