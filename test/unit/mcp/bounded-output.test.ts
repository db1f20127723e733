import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { BoundedOutput } from '../../../src/mcp/bounded-output.js';

void describe('BoundedOutput (run_command result streams)', () => {
  void test('keeps everything up to the bound, then the first and last half with the count of bytes left out', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'binary-ascii', maxLength: 300 }), { maxLength: 40 }),
        fc.integer({ min: 2, max: 600 }),
        (chunks, max) => {
          const out = new BoundedOutput(max);
          for (const c of chunks) out.push(Buffer.from(c, 'latin1'));
          const all = chunks.join('');
          const kept = out.kept();
          assert.equal(kept.totalBytes, all.length);
          assert.equal(kept.omittedBytes, Math.max(0, all.length - max));
          if (all.length <= max) assert.equal(kept.text, all);
          else {
            const head = all.slice(0, Math.ceil(max / 2));
            const tail = all.slice(all.length - Math.floor(max / 2));
            assert.equal(kept.text, `${head}\n[… ${all.length - max} bytes omitted …]\n${tail}`);
          }
        },
      ),
    );
  });

  void test('an output exactly at the bound is whole; one byte over is cut in the middle', () => {
    const exact = new BoundedOutput(4);
    exact.push(Buffer.from('ab'));
    exact.push(Buffer.from('cd'));
    assert.deepEqual(exact.kept(), { text: 'abcd', totalBytes: 4, omittedBytes: 0 });
    const over = new BoundedOutput(4);
    over.push(Buffer.from('abcde'));
    assert.deepEqual(over.kept(), { text: 'ab\n[… 1 bytes omitted …]\nde', totalBytes: 5, omittedBytes: 1 });
  });
});
