/** What only workers mode has: crashing shards and a bounded inbound ring. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SvcError } from '../../../../src/core/errors.js';
import { ActorSystem, type RingKind } from '../../../../actors/runtime/actor-system.js';
import { FrameKind } from '../../../../actors/protocol/frame-kinds.js';
import { waitForChange } from '../../../../actors/ring/wait-async.js';
import { EmitCollector } from './emit-collector.js';

const testActors = new URL('./fixtures/test-actors.js', import.meta.url);

function isSvc(code: string): (err: unknown) => boolean {
  return (err) => err instanceof SvcError && err.code === code;
}

/** The first `n` ids of the form `${prefix}-${i}` that live in shard `shard`. */
function idsInShard(system: ActorSystem, shard: number, prefix: string, n: number): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < n; i++) if (system.shardOf(`${prefix}-${i}`) === shard) ids.push(`${prefix}-${i}`);
  return ids;
}

function seqPayload(seq: number, size: number): Uint8Array {
  const p = new Uint8Array(size).fill(seq & 0xff);
  new DataView(p.buffer).setUint32(0, seq, true);
  return p;
}

void describe('ActorSystem worker shards', () => {
  const crashes = [
    { how: 'exit', ring: 'sab' },
    { how: 'throw', ring: 'sab' },
    { how: 'exit', ring: 'port' },
  ] as const satisfies readonly { how: 'exit' | 'throw'; ring: RingKind }[];
  for (const { how, ring } of crashes) {
    const rings = ring === 'port' ? ', MessagePort rings' : '';
    void test(`a shard whose worker dies (${how === 'exit' ? 'process.exit' : 'uncaught exception'}${rings}) is restarted; the other shard keeps serving`, async () => {
      const emits = new EmitCollector();
      const restarts: { shard: number; lost: string[] }[] = [];
      let restarted!: () => void;
      const restartSeen = new Promise<void>((resolve) => (restarted = resolve));
      const logged: string[] = [];
      const system = await ActorSystem.start({
        mode: 'workers',
        ring,
        shards: 2,
        actorModules: [testActors],
        onEmit: emits.onEmit,
        logger: { info: () => undefined, warn: () => undefined, error: (_obj, msg) => logged.push(msg ?? '') },
        onShardRestart: (shard, lost) => {
          restarts.push({ shard, lost: [...lost].sort() });
          restarted();
        },
      });
      try {
        const doomed = idsInShard(system, 0, 'doomed', 3);
        const [survivor] = idsInShard(system, 1, 'survivor', 1);
        for (const id of [...doomed, survivor!]) await system.spawn('echo', id);

        const inFlight = system.call(doomed[1]!, 'hang');
        const crash = system.call(doomed[0]!, 'crash', { how });
        await assert.rejects(inFlight, isSvc('actor.shard_restarted'));
        if (how === 'exit') await assert.rejects(crash, isSvc('actor.shard_restarted'));
        else {
          // The answer races the uncaught exception that follows it: either outcome is correct.
          const outcome = await crash.catch((err: unknown) => (isSvc('actor.shard_restarted')(err) ? 'restarted' : err));
          assert.ok(outcome === 'crashing' || outcome === 'restarted', String(outcome));
        }
        await restartSeen;

        assert.deepEqual(restarts, [{ shard: 0, lost: [...doomed].sort() }]);
        assert.equal(system.stats().restarts, 1);
        assert.equal(system.stats().perShard[0]!.restarts, 1);
        assert.ok(
          logged.some((m) => /restart/.test(m)),
          'the crash is logged',
        );

        // The other shard never noticed.
        assert.equal((await system.call<{ id: string }>(survivor!, 'whoami')).id, survivor);
        // The restarted shard serves again: the lost actors are gone, their ids can be reused.
        await assert.rejects(system.call(doomed[2]!, 'whoami'), isSvc('actor.not_found'));
        await system.spawn('echo', doomed[2]!);
        const payload = new Uint8Array([1, 2, 3, 4, 5]);
        assert.equal(system.send(doomed[2]!, FrameKind.kFrameData, payload), true);
        await emits.count(doomed[2]!, 1);
        assert.deepEqual(emits.frames(doomed[2]!), [payload]);
      } finally {
        await system.stop();
      }
    });
  }

  void test('a type in mainThreadActorTypes lives on the main thread: calls, frames, stopSelf and a new spawn reach it there', async () => {
    const emits = new EmitCollector();
    const system = await ActorSystem.start({ mode: 'workers', shards: 1, actorModules: [testActors], onEmit: emits.onEmit });
    try {
      await system.spawn('pinned', 'queue-1');
      await system.spawn('echo', 'worker-1');
      assert.equal(await system.call('queue-1', 'onMainThread'), true);
      assert.equal(await system.call('worker-1', 'onMainThread'), false);
      assert.equal(system.stats().actors, 2);
      await assert.rejects(system.spawn('echo', 'queue-1'), isSvc('actor.already_exists'));
      await assert.rejects(system.spawn('pinned', 'worker-1'), isSvc('actor.already_exists'));
      // Frames to it are echoed from the main thread, synchronously.
      assert.equal(system.send('queue-1', FrameKind.kFrameData, new Uint8Array([1, 2, 3])), true);
      assert.deepEqual(
        emits.byKey.get('queue-1')?.map((p) => [...p]),
        [[1, 2, 3]],
      );
      await system.call('queue-1', 'stopSelf');
      await new Promise((r) => setImmediate(r));
      await assert.rejects(system.call('queue-1', 'whoami'), isSvc('actor.not_found'));
      await system.spawn('pinned', 'queue-1', { again: true });
      assert.deepEqual((await system.call<{ init: unknown }>('queue-1', 'whoami')).init, { again: true });
    } finally {
      await system.stop();
    }
  });

  void test('a full inbound ring makes send() return false; after whenWritable every frame arrives, in order', async () => {
    const ringBytes = 16 * 1024;
    const system = await ActorSystem.start({ mode: 'workers', shards: 1, actorModules: [testActors], ringBytes, onEmit: () => undefined });
    try {
      await system.spawn('sink', 'sink-1');
      // Park the shard's thread so nothing drains the ring while we fill it.
      const gate = new SharedArrayBuffer(8);
      const gateWords = new Int32Array(gate);
      const blocked = system.call('sink-1', 'block', { gate });
      while (Atomics.load(gateWords, 1) === 0) await waitForChange(gateWords, 1, 0, undefined, () => false);

      const size = 1000;
      let seq = 0;
      while (system.send('sink-1', FrameKind.kFrameData, seqPayload(seq, size))) seq++;
      const acceptedWhileBlocked = seq;
      assert.ok(acceptedWhileBlocked > 0 && acceptedWhileBlocked * size < ringBytes, `${acceptedWhileBlocked} frames fit`);
      assert.equal(system.stats().perShard[0]!.inboundUsedBytes > ringBytes - 2 * 1024, true, 'the ring is nearly full');

      Atomics.store(gateWords, 0, 1);
      Atomics.notify(gateWords, 0);
      assert.equal(await blocked, 'released');

      const total = 500;
      for (; seq < total; seq++) {
        const p = seqPayload(seq, size);
        while (!system.send('sink-1', FrameKind.kFrameData, p)) await system.whenWritable('sink-1', p.byteLength);
      }
      let tally = await system.call<{ count: number; bad: number; bytes: number }>('sink-1', 'tally');
      for (let i = 0; i < 1000 && tally.count < total; i++) tally = await system.call('sink-1', 'tally');
      assert.deepEqual(tally, { count: total, bad: 0, bytes: total * size });
    } finally {
      await system.stop();
    }
  });
});
