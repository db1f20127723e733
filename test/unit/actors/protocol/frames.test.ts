import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  FrameDecodeError,
  FrameEncoder,
  decodeFrame,
  encodeFrame,
  frameHeaderBytes,
  kMaxFrameKeyBytes,
  utf8Length,
} from '../../../../actors/protocol/frames.js';
import { FrameKind } from '../../../../actors/protocol/frame-kinds.js';

function joined(parts: readonly Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

void describe('ring frames', () => {
  void test('encode then decode gives back kind, flags, key and payload byte-exact', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 255 }),
        fc.integer({ min: 0, max: 255 }),
        fc.string({ unit: 'grapheme', maxLength: 40 }),
        fc.uint8Array({ maxLength: 200 }),
        (kind, flags, key, payload) => {
          const parts = encodeFrame(kind, flags, key, payload);
          assert.equal(parts[1], payload, 'the payload is passed through, not copied');
          assert.equal(parts[0].byteLength, frameHeaderBytes(key));
          const frame = decodeFrame(joined(parts));
          assert.deepEqual({ ...frame, payload: Buffer.from(frame.payload) }, { kind, flags, key, payload: Buffer.from(payload) });
        },
      ),
      { numRuns: 300 },
    );
  });

  void test('utf8Length agrees with Buffer.byteLength for any well-formed string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 50 }), (s) => {
        assert.equal(utf8Length(s), Buffer.byteLength(s, 'utf8'));
      }),
    );
  });

  void test('one FrameEncoder reuses its buffer and still encodes each header correctly', () => {
    const enc = new FrameEncoder();
    const a = enc.header(FrameKind.kFrameData, 0, 'agent-1').slice();
    const b = enc.header(FrameKind.kFrameEmit, 3, 'ünïcødé/topic').slice();
    assert.deepEqual(decodeFrame(a), { kind: 1, flags: 0, key: 'agent-1', payload: new Uint8Array(0) });
    assert.equal(decodeFrame(b).key, 'ünïcødé/topic');
    assert.equal(decodeFrame(b).flags, 3);
  });

  void test('the payload view shares memory with the record (no copy)', () => {
    const record = joined(encodeFrame(FrameKind.kFrameEmit, 0, 'k', new Uint8Array([1, 2, 3])));
    const frame = decodeFrame(record);
    assert.equal(frame.payload.buffer, record.buffer);
    assert.equal(frame.payload.byteOffset, record.byteOffset + 8, 'payload starts after the header padded to 8 bytes');
  });

  void test('bad arguments to the encoder are RangeErrors', () => {
    const enc = new FrameEncoder();
    assert.throws(() => enc.header(0, 0, 'a'), RangeError);
    assert.throws(() => enc.header(256, 0, 'a'), RangeError);
    assert.throws(() => enc.header(1, -1, 'a'), RangeError);
    assert.throws(() => enc.header(1, 0, 'x'.repeat(kMaxFrameKeyBytes + 1)), RangeError);
    assert.throws(() => enc.header(1, 0, 'é'.repeat(kMaxFrameKeyBytes / 2 + 1)), RangeError);
    assert.equal(enc.header(1, 0, 'x'.repeat(kMaxFrameKeyBytes)).byteLength, (4 + kMaxFrameKeyBytes + 7) & ~7);
  });

  void test('malformed records are rejected with a typed reason', () => {
    const reason = (r: Uint8Array): string => {
      try {
        decodeFrame(r);
        return 'ok';
      } catch (err) {
        assert.ok(err instanceof FrameDecodeError);
        return err.reason;
      }
    };
    assert.equal(reason(new Uint8Array([1, 0, 0])), 'too_short');
    assert.equal(reason(new Uint8Array([0, 0, 0, 0])), 'bad_kind');
    assert.equal(reason(new Uint8Array([1, 0, 5, 0, 97])), 'key_overflow');
    assert.equal(reason(new Uint8Array([1, 0, 2, 0, 0xc3, 0x28, 0, 0])), 'bad_utf8');
    assert.equal(reason(new Uint8Array([1, 0, 2, 0, 97, 98])), 'key_overflow', 'the header padding is part of the frame');
  });

  void test('garbage never makes the decoder throw anything but FrameDecodeError', () => {
    // Mostly-valid headers with a small key length, so random key bytes reach the UTF-8 check.
    const plausibleFrame = fc
      .tuple(fc.integer({ min: 0, max: 255 }), fc.nat({ max: 255 }), fc.nat({ max: 40 }), fc.uint8Array({ maxLength: 60 }))
      .map(([kind, flags, keyBytes, rest]) => new Uint8Array([kind, flags, keyBytes, 0, ...rest]));
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 300 }), plausibleFrame), fc.nat({ max: 16 }), (bytes, offset) => {
        // Also decode views that do not start at the buffer's origin.
        const view = bytes.subarray(Math.min(offset, bytes.length));
        try {
          const frame = decodeFrame(view);
          assert.ok(frame.kind >= 1 && frame.kind <= 255);
          assert.ok(((4 + Buffer.byteLength(frame.key) + 7) & ~7) + frame.payload.byteLength === view.byteLength);
        } catch (err) {
          assert.ok(err instanceof FrameDecodeError, `unexpected ${String(err)}`);
        }
      }),
      { numRuns: 2000 },
    );
  });
});
