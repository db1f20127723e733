/**
 * The binary layouts of actors/protocol/agent-frames.ts round-trip (fuzzed), and short payloads decode to
 * null rather than throwing.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  agentIdOfActor,
  agentActorId,
  decodeConnPrefixed,
  decodeOutputFrame,
  encodeAgentClose,
  encodeOutputFrame,
  encodeToAgent,
  kOutputHeaderBytes,
} from '../../../../actors/protocol/agent-frames.js';

void describe('agent frames', () => {
  void test('output frames round-trip', () => {
    fc.assert(
      fc.property(
        fc.record({
          stream: fc.integer({ min: 1, max: 3 }),
          eof: fc.boolean(),
          seq: fc.maxSafeNat(),
          offset: fc.maxSafeNat(),
          timestampMs: fc.maxSafeNat(),
          clock: fc.maxSafeNat(),
          carry: fc.uint8Array({ maxLength: 3 }),
        }),
        fc.uint8Array({ maxLength: 200 }),
        (h, data) => {
          const f = encodeOutputFrame(h, data);
          assert.equal(f.byteLength, kOutputHeaderBytes + data.byteLength);
          const d = decodeOutputFrame(f)!;
          assert.deepEqual(
            { stream: d.stream, eof: d.eof, seq: d.seq, offset: d.offset, timestampMs: d.timestampMs, clock: d.clock, carry: [...d.carry] },
            { ...h, carry: [...h.carry] },
          );
          assert.deepEqual(d.data, data);
        },
      ),
    );
    assert.equal(decodeOutputFrame(new Uint8Array(kOutputHeaderBytes - 1)), null);
  });

  void test('conn-prefixed frames round-trip; short ones are null', () => {
    fc.assert(
      fc.property(fc.nat({ max: 0xffffffff }), fc.uint8Array({ maxLength: 64 }), (connId, bytes) => {
        const d = decodeConnPrefixed(encodeToAgent(connId, bytes))!;
        assert.equal(d.connId, connId);
        assert.deepEqual(d.rest, bytes);
      }),
    );
    const c = decodeConnPrefixed(encodeAgentClose(9, 7, 'no'))!;
    assert.deepEqual([c.connId, c.rest[0], Buffer.from(c.rest.subarray(1)).toString()], [9, 7, 'no']);
    assert.equal(decodeConnPrefixed(new Uint8Array(3)), null);
  });

  void test('agent actor ids', () => {
    assert.equal(agentActorId('a-1'), 'agent:a-1');
    assert.equal(agentIdOfActor('agent:a-1'), 'a-1');
    assert.equal(agentIdOfActor('agent:a-1/cmd/c'), null);
    assert.equal(agentIdOfActor('vm:x'), null);
    assert.equal(agentIdOfActor('agent:'), null);
  });
});
