import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { fnv1a32, shardIndexOf } from '../../../../actors/runtime/shard-hash.js';

/** Reference: FNV-1a over Buffer's UTF-8 bytes. */
function reference(s: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(s, 'utf8')) h = Math.imul(h ^ b, 0x01000193);
  return h >>> 0;
}

void describe('shard hash', () => {
  void test('matches the published FNV-1a 32-bit test vectors', () => {
    assert.equal(fnv1a32(''), 0x811c9dc5);
    assert.equal(fnv1a32('a'), 0xe40c292c);
    assert.equal(fnv1a32('foobar'), 0xbf9cf968);
  });

  void test('hashes the UTF-8 bytes of any string, lone surrogates included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 30 }), (s) => {
        assert.equal(fnv1a32(s), reference(s));
      }),
      { numRuns: 200 },
    );
  });

  void test('the shard of an id is stable and within range', () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 64 }), (id, shards) => {
        const shard = shardIndexOf(id, shards);
        assert.ok(Number.isInteger(shard) && shard >= 0 && shard < shards);
        assert.equal(shardIndexOf(id, shards), shard);
      }),
    );
    // Pinned: a change of hash would move every actor of a running fleet to another shard.
    fc.assert(
      fc.property(
        fc.string().filter((s) => !s.includes('/')),
        fc.string(),
        fc.integer({ min: 1, max: 64 }),
        (owner, rest, shards) => {
          assert.equal(shardIndexOf(`${owner}/${rest}`, shards), shardIndexOf(owner, shards), 'ids sharing a placement key share a shard');
        },
      ),
    );
    assert.deepEqual(
      ['agent-1', 'agent-2', 'vm-ops:agent-1', 'cmd:42'].map((id) => shardIndexOf(id, 3)),
      ['agent-1', 'agent-2', 'vm-ops:agent-1', 'cmd:42'].map((id) => reference(id) % 3),
    );
  });
});
