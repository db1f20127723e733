import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  OUTPUT_HEADER_BYTES,
  decodeBinaryInput,
  decodeBinaryOutput,
  encodeBinaryInput,
  encodeBinaryOutput,
  selectSubprotocol,
} from '../../../../src/sessions/binding/binary.js';
import { LIMITS } from '../../../../src/sessions/binding/codes.js';

const streams = fc.constantFrom('stdout' as const, 'stderr' as const, 'log' as const);

describe('pty-ws.v1.binary codec', () => {
  test('PW1O layout: magic, u64 big-endian sequence, stream byte, bytes', () => {
    const msg = encodeBinaryOutput(0x0102030405, Uint8Array.of(0x68, 0x69));
    assert.deepEqual([...msg], [0x50, 0x57, 0x31, 0x4f, 0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 1, 0x68, 0x69]);
    assert.equal(OUTPUT_HEADER_BYTES, 13);
  });

  test('PW1I layout: magic then the bytes', () => {
    assert.deepEqual([...encodeBinaryInput(Uint8Array.of(3))], [0x50, 0x57, 0x31, 0x49, 3]);
  });

  test('output round-trips (any sequence up to 2^53 - 1, any stream, any bytes)', () => {
    fc.assert(
      fc.property(fc.nat({ max: Number.MAX_SAFE_INTEGER }), streams, fc.uint8Array({ maxLength: 2048 }), (sequence, stream, bytes) => {
        const r = decodeBinaryOutput(encodeBinaryOutput(sequence, bytes, stream));
        assert.ok(r.ok);
        assert.equal(r.value.sequence, sequence);
        assert.equal(r.value.stream, stream);
        assert.deepEqual(new Uint8Array(r.value.bytes), bytes);
      }),
      { numRuns: 500 },
    );
  });

  test('input round-trips, also from a view into a larger buffer', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2048 }), fc.nat({ max: 16 }), (bytes, pad) => {
        const msg = encodeBinaryInput(bytes);
        const host = new Uint8Array(pad + msg.byteLength);
        host.set(msg, pad);
        const r = decodeBinaryInput(host.subarray(pad));
        assert.ok(r.ok);
        assert.deepEqual(new Uint8Array(r.value), bytes);
      }),
      { numRuns: 300 },
    );
  });

  test('refusals', () => {
    assert.equal(decodeBinaryInput(Uint8Array.of(0x50, 0x57, 0x31)).ok, false, 'shorter than the magic');
    assert.equal(decodeBinaryInput(encodeBinaryOutput(1, Uint8Array.of(1))).ok, false, 'output magic as input');
    assert.equal(decodeBinaryInput(encodeBinaryInput(new Uint8Array(LIMITS.maxInputBytes + 1))).ok, false, 'over the input limit');
    assert.ok(decodeBinaryInput(encodeBinaryInput(new Uint8Array(LIMITS.maxInputBytes))).ok, 'at the input limit');
    assert.equal(decodeBinaryOutput(encodeBinaryInput(Uint8Array.of(1))).ok, false, 'input magic as output');
    assert.equal(decodeBinaryOutput(encodeBinaryOutput(1, new Uint8Array(0)).subarray(0, 12)).ok, false, 'truncated header');
    const badStream = encodeBinaryOutput(1, new Uint8Array(0));
    badStream[12] = 9;
    assert.equal(decodeBinaryOutput(badStream).ok, false, 'unknown stream byte');
    const huge = encodeBinaryOutput(1, new Uint8Array(0));
    huge[4] = 0xff;
    assert.equal(decodeBinaryOutput(huge).ok, false, 'sequence beyond 2^53 - 1');
    assert.throws(() => encodeBinaryOutput(-1, new Uint8Array(0)), RangeError);
    assert.throws(() => encodeBinaryOutput(2 ** 53, new Uint8Array(0)), RangeError);
  });
});

describe('pty-ws.v1 subprotocol selection', () => {
  test('binary preferred, then JSON, else refused', () => {
    assert.equal(selectSubprotocol('pty-ws.v1'), 'pty-ws.v1');
    assert.equal(selectSubprotocol('pty-ws.v1, pty-ws.v1.binary'), 'pty-ws.v1.binary');
    assert.equal(selectSubprotocol('pty-ws.v1.binary'), 'pty-ws.v1.binary');
    assert.equal(selectSubprotocol('pty-ws.v1, bearer.dG9rZW4'), 'pty-ws.v1');
    assert.equal(selectSubprotocol('PTY-WS.V1'), null);
    assert.equal(selectSubprotocol('pty-ws.v2'), null);
    assert.equal(selectSubprotocol(''), null);
    assert.equal(selectSubprotocol(undefined), null);
  });
});
