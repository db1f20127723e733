import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { StreamTextDecoder } from '../../../../actors/protocol/stream-text.js';

const enc = new TextEncoder();

void describe('StreamTextDecoder', () => {
  void test('keeps a byte-order mark as text', () => {
    const d = new StreamTextDecoder();
    assert.equal(d.decode(enc.encode('\ufeffx')), '\ufeffx');
  });
});
