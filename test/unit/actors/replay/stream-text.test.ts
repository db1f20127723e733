import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { StreamTextDecoder, tailBefore } from '../../../../actors/replay/stream-text.js';

const enc = new TextEncoder();

void describe('StreamTextDecoder', () => {
  void test('keeps a byte-order mark as text (a mid-stream replay decodes like the live stream)', () => {
    const d = new StreamTextDecoder();
    assert.equal(d.decode(enc.encode('\ufeffx')), '\ufeffx');
  });

  void test('priming with the last bytes of the stream completes a split 4-byte character', () => {
    const emoji = enc.encode('a😀'); // 61 f0 9f 98 80
    for (let cut = 2; cut <= 4; cut++) {
      const d = new StreamTextDecoder();
      d.primeFromTail(emoji.subarray(0, cut));
      assert.equal(d.decode(emoji.subarray(cut)), '😀', `cut at ${cut}`);
    }
    const d = new StreamTextDecoder();
    d.primeFromTail(enc.encode('complete'));
    assert.equal(d.decode(enc.encode('next')), 'next');
  });
});

void describe('tailBefore', () => {
  const c = (offset: number, text: string) => ({ offset, bytes: enc.encode(text) });

  void test('collects the last 3 bytes across several small chunks, newest first', () => {
    assert.deepEqual(tailBefore(6, [c(5, 'f'), c(4, 'e'), c(0, 'abcd')]), enc.encode('def'));
    assert.deepEqual(tailBefore(2, [c(0, 'ab')]), enc.encode('ab'));
    assert.deepEqual(tailBefore(0, []), new Uint8Array(0));
  });

  void test('null when bytes before the chunk are missing', () => {
    assert.equal(tailBefore(10, []), null);
    assert.equal(tailBefore(10, [c(5, 'abc')]), null, 'offsets do not meet');
    assert.equal(tailBefore(5, [c(4, 'e')]), null, 'fewer than 3 bytes known and the stream did not start there');
  });
});
