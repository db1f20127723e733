import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ByteSlabs, joinOwned } from '../../../src/util/byte-slabs.js';

void describe('ByteSlabs', () => {
  void test('property: whatever the chunking and slab size, take() joined is the bytes pushed, each part over a buffer of its own', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 30 }), fc.integer({ min: 1, max: 257 }), (chunks, slabBytes) => {
        const slabs = new ByteSlabs(slabBytes);
        for (const c of chunks) slabs.push(c);
        const expected = Buffer.concat(chunks);
        assert.equal(slabs.byteLength, expected.length);
        const parts = slabs.take();
        assert.deepEqual(joinOwned(parts), expected);
        assert.equal(new Set(parts.map((p) => p.buffer)).size, parts.length);
        for (const p of parts) assert.equal(p.byteOffset, 0);
        assert.equal(slabs.byteLength, 0);
        assert.deepEqual(slabs.take(), []);
      }),
    );
  });

  void test('a pushed chunk is copied: changing it later changes nothing; the parts can be transferred', () => {
    const slabs = new ByteSlabs(4);
    const chunk = Buffer.from('abcdef');
    slabs.push(chunk);
    chunk.fill(0);
    const parts = slabs.take();
    const { port1, port2 } = new MessageChannel();
    port1.postMessage(
      parts,
      parts.map((p) => p.buffer as ArrayBuffer),
    );
    port1.close();
    port2.close();
    assert.equal(parts[0]?.byteLength, 0, 'transferred, so detached here');
    assert.throws(() => new ByteSlabs(0), RangeError);
  });
});
