/**
 * ActorSystem behaviour that must be the same in every mode: workers (shards in worker threads
 * behind SAB rings, and behind the MessagePort fallback rings) and inline (same hosts on the main
 * thread).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SvcError } from '../../../../src/core/errors.js';
import { ActorSystem, type ActorMode, type RingKind } from '../../../../actors/runtime/actor-system.js';
import { FrameKind } from '../../../../actors/protocol/frame-kinds.js';
import { fnv1a32 } from '../../../../actors/runtime/shard-hash.js';
import { EmitCollector } from './emit-collector.js';

const testActors = new URL('./fixtures/test-actors.js', import.meta.url);
const noActorTypes = new URL('./fixtures/no-actor-types.js', import.meta.url);

function isSvc(code: string): (err: unknown) => boolean {
  return (err) => err instanceof SvcError && err.code === code;
}

/** Sends, honouring backpressure (retry after whenWritable). */
async function sendAll(system: ActorSystem, id: string, payloads: readonly Uint8Array[]): Promise<void> {
  for (const p of payloads) {
    while (!system.send(id, FrameKind.kFrameData, p)) await system.whenWritable(id, p.byteLength);
  }
}

function payload(seed: number, size: number): Uint8Array {
  const p = new Uint8Array(size);
  for (let i = 0; i < size; i++) p[i] = (seed * 31 + i * 7) & 0xff;
  return p;
}

const variants: readonly { mode: ActorMode; ring: RingKind; name: string }[] = [
  { mode: 'workers', ring: 'sab', name: 'workers' },
  { mode: 'workers', ring: 'port', name: 'workers, MessagePort rings' },
  { mode: 'inline', ring: 'sab', name: 'inline' },
];

for (const { mode, ring, name } of variants) {
  void describe(`ActorSystem (${name})`, () => {
    let system: ActorSystem;
    const emits = new EmitCollector();

    before(async () => {
      system = await ActorSystem.start({ mode, ring, shards: 2, actorModules: [testActors], ringBytes: 64 * 1024, onEmit: emits.onEmit });
    });
    after(() => system.stop());

    void test('a data frame reaches its actor and the echo comes back byte-exact', async () => {
      await system.spawn('echo', 'rt-1');
      const sizes = [0, 1, 7, 8, 100, 4096, 30_000];
      const payloads = sizes.map((n, i) => payload(i, n));
      await sendAll(system, 'rt-1', payloads);
      await emits.count('rt-1', payloads.length);
      assert.deepEqual(emits.frames('rt-1'), payloads);
      assert.ok(emits.kinds.get('rt-1')!.every((k) => k === FrameKind.kFrameData));
    });

    void test('frames for each actor arrive in send order while several actors are fed interleaved', async () => {
      const ids = ['ord-a', 'ord-b', 'ord-c', 'ord-d', 'ord-e'];
      for (const id of ids) await system.spawn('echo', id);
      const perActor = 300;
      for (let seq = 0; seq < perActor; seq++) {
        for (const id of ids) await sendAll(system, id, [payload(seq, 4 + (seq % 50))]);
      }
      for (const id of ids) {
        await emits.count(id, perActor);
        assert.deepEqual(
          emits.frames(id),
          Array.from({ length: perActor }, (_, seq) => payload(seq, 4 + (seq % 50))),
        );
      }
    });

    void test('an actor lives in the shard its id hashes to (FNV-1a mod shards)', async () => {
      for (const id of ['h-0', 'h-1', 'h-2', 'h-3', 'agent-7f3a', 'ünï-cødé']) {
        await system.spawn('echo', id, { note: id });
        const who = await system.call<{ id: string; type: string; shard: number; init: unknown }>(id, 'whoami');
        assert.equal(system.shardOf(id), fnv1a32(id) % 2);
        assert.deepEqual(who, { id, type: 'echo', shard: system.shardOf(id), init: { note: id } });
      }
    });

    void test('call errors keep their SvcError code, message and details across the thread', async () => {
      await system.spawn('echo', 'err-1');
      await assert.rejects(system.call('err-1', 'fail', { code: 'VM_BUSY', message: 'queue busy', details: { vm: 'agent-x' } }), (err) => {
        assert.ok(err instanceof SvcError);
        assert.equal(err.code, 'VM_BUSY');
        assert.equal(err.message, 'queue busy');
        assert.deepEqual(err.details, { vm: 'agent-x' });
        return true;
      });
      await assert.rejects(system.call('err-1', 'failPlain'), (err) => {
        assert.ok(isSvc('server.internal')(err));
        assert.doesNotMatch((err as Error).message, /detail callers must not see/);
        return true;
      });
      await assert.rejects(system.call('nobody-home', 'whoami'), isSvc('actor.not_found'));
      await assert.rejects(system.spawn('echo', 'err-1'), isSvc('actor.already_exists'));
      await assert.rejects(system.spawn('no-such-type', 'err-2'), isSvc('request.invalid'));
    });

    void test('a call is bounded by timeoutMs and by an AbortSignal', async () => {
      await system.spawn('echo', 'slow-1');
      // Call deadlines are unref'd timers; inline, nothing else would keep this process alive.
      const keepAlive = setInterval(() => undefined, 1000);
      try {
        await assert.rejects(system.call('slow-1', 'hang', undefined, { timeoutMs: 200 }), isSvc('server.timeout'));
      } finally {
        clearInterval(keepAlive);
      }
      const reason = new Error('caller gave up');
      const ac = new AbortController();
      const pending = system.call('slow-1', 'hang', undefined, { signal: ac.signal });
      ac.abort(reason);
      await assert.rejects(pending, (e) => e === reason);
      assert.deepEqual((await system.call<{ id: string }>('slow-1', 'whoami')).id, 'slow-1', 'still serving');
    });

    void test('stopActor runs the stop handler; the id is then unknown and free again', async () => {
      await system.spawn('echo', 'stop-1');
      await system.stopActor('stop-1');
      await emits.count('stopped:stop-1', 1);
      await assert.rejects(system.call('stop-1', 'whoami'), isSvc('actor.not_found'));
      await assert.rejects(system.stopActor('stop-1'), isSvc('actor.not_found'));
      await system.spawn('echo', 'stop-1');
      assert.equal((await system.call<{ id: string }>('stop-1', 'whoami')).id, 'stop-1');
    });

    void test('an actor can spawn another actor (in whatever shard it hashes to) and stop itself', async () => {
      await system.spawn('echo', 'parent-1');
      const children = ['child-1', 'child-2', 'child-3', 'child-4'];
      for (const id of children) await system.call('parent-1', 'spawn', { type: 'echo', id, init: { announce: true } });
      await emits.count('hello', children.length);
      assert.deepEqual(
        emits
          .frames('hello')
          .map((b) => new TextDecoder().decode(b))
          .sort(),
        children,
      );
      await system.call('child-2', 'stopSelf');
      await emits.count('stopped:child-2', 1);
      await assert.rejects(system.call('child-2', 'whoami'), isSvc('actor.not_found'));
    });

    void test('an actor whose emit hits a full outbound ring retries after whenWritable and loses nothing', async () => {
      await system.spawn('echo', 'burst-1');
      const count = 2000;
      const size = 700; // 2000 × 700 B ≫ the 64 KiB outbound ring
      await system.call('burst-1', 'burst', { count, size });
      await emits.count('burst:burst-1', count);
      const frames = emits.frames('burst:burst-1');
      assert.equal(frames.length, count);
      frames.forEach((f, seq) => {
        assert.equal(f.byteLength, size);
        assert.equal(new DataView(f.buffer, f.byteOffset).getUint32(0, true), seq);
        assert.equal(f[size - 1], seq & 0xff);
      });
    });

    // Whatever onEmit writes to sockets in one turn leaves with no chance for them to drain, so
    // the pump must yield often (an SSE reader that kept up was cut off as slow when it did not).
    void test('the main thread gets back to its event loop after at most 64 KiB of emitted frames', async () => {
      if (mode === 'inline') return; // inline, emits run inside the caller's own turn
      await system.spawn('echo', 'turns-1');
      const count = 2000;
      const size = 700;
      let sinceTick = 0;
      let worst = 0;
      let seen = 0;
      let ticking = true;
      const tick = (): void => {
        sinceTick = 0;
        if (ticking) setImmediate(tick);
      };
      setImmediate(tick);
      try {
        const all = emits.until(() => {
          const n = emits.frames('burst:turns-1').length;
          sinceTick += (n - seen) * size;
          seen = n;
          worst = Math.max(worst, sinceTick);
          return n >= count;
        });
        await system.call('turns-1', 'burst', { count, size });
        await all;
      } finally {
        ticking = false;
      }
      assert.ok(worst <= 64 * 1024 + size, `at most 64 KiB and one frame between two turns of the event loop, saw ${worst} bytes`);
    });

    void test('a frame larger than a ring accepts is a RangeError, not a silent drop', () => {
      assert.throws(() => system.send('rt-1', FrameKind.kFrameData, new Uint8Array(64 * 1024)), RangeError);
    });

    void test('stats report mode, shards and actors', () => {
      const stats = system.stats();
      assert.equal(stats.mode, mode);
      assert.equal(stats.shards, 2);
      assert.equal(stats.perShard.length, 2);
      assert.equal(stats.actors, stats.perShard[0]!.actors + stats.perShard[1]!.actors);
      assert.ok(stats.actors >= 10);
      assert.equal(stats.restarts, 0);
    });

    void test('frames for an unknown actor are counted, not silently lost', async () => {
      const before = (await system.counters()).reduce((n, c) => n + c.undeliverable, 0);
      assert.equal(system.send('ghost-actor', FrameKind.kFrameData, new Uint8Array(3)), true);
      // The worker counts it when it drains the frame, which control calls do not wait for: ask again.
      let after = before;
      for (let i = 0; i < 100 && after === before; i++) after = (await system.counters()).reduce((n, c) => n + c.undeliverable, 0);
      assert.equal(after, before + 1);
    });
  });

  void describe(`ActorSystem lifecycle (${name})`, () => {
    void test('stop() is idempotent, delivers what stopping actors emit, and then refuses work', async () => {
      const emits = new EmitCollector();
      const system = await ActorSystem.start({ mode, ring, shards: 2, actorModules: [testActors], onEmit: emits.onEmit });
      const ids = ['life-1', 'life-2', 'life-3'];
      for (const id of ids) await system.spawn('echo', id);
      const first = system.stop();
      assert.equal(system.stop(), first);
      await first;
      for (const id of ids) assert.equal(emits.frames(`stopped:${id}`).length, 1, `${id} stop handler ran and its frame arrived`);
      assert.throws(() => system.send('life-1', FrameKind.kFrameData, new Uint8Array(1)), isSvc('server.not_ready'));
      await assert.rejects(system.call('life-1', 'whoami'), isSvc('server.not_ready'));
      await assert.rejects(system.spawn('echo', 'life-4'), isSvc('server.not_ready'));
    });

    void test('stop() returns within its deadline even when an actor never finishes stopping', async () => {
      const system = await ActorSystem.start({ mode, ring, shards: 1, actorModules: [testActors], onEmit: () => undefined });
      await system.spawn('stubborn', 'mule');
      await system.stop({ deadlineMs: 300 });
    });

    void test('start() rejects, leaving nothing running, when an actor module has no actorTypes', async () => {
      await assert.rejects(
        ActorSystem.start({ mode, shards: 2, actorModules: [testActors, noActorTypes], onEmit: () => undefined }),
        /actorTypes/,
      );
    });

    void test('start() rejects bad options', async () => {
      await assert.rejects(ActorSystem.start({ mode, shards: 0, actorModules: [testActors], onEmit: () => undefined }), RangeError);
      await assert.rejects(
        ActorSystem.start({ mode, shards: 1, actorModules: [testActors], ringBytes: 1000, onEmit: () => undefined }),
        RangeError,
      );
      await assert.rejects(
        ActorSystem.start({ mode, ring: 'shm' as RingKind, shards: 1, actorModules: [testActors], onEmit: () => undefined }),
        RangeError,
      );
    });
  });
}
