/**
 * The publish frames between the replay state and the fanout (actors/protocol/publish-frames.ts):
 * what is encoded decodes to the same fields and bytes, for any content; truncated payloads are
 * refused; command keys split back; the scratch-built raw output frame equals encodeOutputFrame.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { outputFrameInScratch } from '../../../../actors/agent-connection/command-output.js';
import { decodeOutputFrame, encodeOutputFrame } from '../../../../actors/protocol/agent-frames.js';
import {
  chatTopic,
  commandKey,
  decodeChatPublish,
  decodeOutputPublish,
  encodeChatPublish,
  encodeSsePublish,
  parseCommandKey,
  streamCode,
} from '../../../../actors/protocol/publish-frames.js';

const cursorArb = fc.oneof(
  fc.constant(''),
  fc.tuple(fc.nat(), fc.nat()).map(([c, s]) => `${c}-${s}`),
);

void describe('publish frames', () => {
  void test('fast-check: an output publish decodes to its cursor, stream, flags and bytes', () => {
    fc.assert(
      fc.property(cursorArb, fc.uint8Array({ maxLength: 300 }), fc.nat(3), fc.nat(3), (cursor, sse, flags, stream) => {
        const out = encodeSsePublish(flags, stream, cursor, sse);
        const d = decodeOutputPublish(out);
        assert.ok(d !== null);
        assert.equal(d.flags, flags);
        assert.equal(d.stream, [undefined, 'stdout', 'stderr', 'log'][stream]);
        assert.equal(d.cursor, cursor === '' ? undefined : cursor);
        assert.deepEqual([...d.sse], [...sse]);
        if (sse.byteLength > 0) assert.equal(decodeOutputPublish(out.subarray(0, out.byteLength - 1)), null, 'truncated');
      }),
    );
  });

  void test('the stream codes; an unknown one is refused', () => {
    const d = decodeOutputPublish(encodeSsePublish(1, streamCode('stderr'), '5-6', Uint8Array.from([1, 2, 3])))!;
    assert.equal(d.stream, 'stderr');
    assert.equal(streamCode(undefined), 0);
    assert.equal(decodeOutputPublish(Uint8Array.from([0, 9, 0, 0, 0, 0, 0, 0])), null, 'unknown stream code');
  });

  void test('fast-check: a chat publish decodes to its id, terminal flag and frame', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), fc.boolean(), fc.uint8Array({ maxLength: 200 }), (cursor, terminal, frame) => {
        const d = decodeChatPublish(encodeChatPublish(terminal, cursor, frame));
        assert.ok(d !== null);
        assert.equal(d.cursor, Buffer.from(cursor, 'utf8').toString('utf8'));
        assert.equal(d.terminal, terminal);
        assert.deepEqual([...d.frame], [...frame]);
      }),
    );
  });

  void test('command keys and chat topics', () => {
    assert.deepEqual(parseCommandKey(commandKey('agent-1', 'cmd:with/odd\u0000chars')), {
      agentId: 'agent-1',
      commandId: 'cmd:with/odd\u0000chars',
    });
    assert.equal(parseCommandKey('no separator'), null);
    assert.notEqual(chatTopic('a', 'b-c'), chatTopic('a-b', 'c'));
  });

  void test('fast-check: the scratch raw output frame is encodeOutputFrame', () => {
    fc.assert(
      fc.property(
        fc.nat(3),
        fc.boolean(),
        fc.nat(1e9),
        fc.nat(1e9),
        fc.uint8Array({ maxLength: 70_000 }),
        (stream, eof, seq, offset, data) => {
          const h = { stream, eof, seq, offset, timestampMs: 1_700_000_000_000, clock: seq + 1, carry: Uint8Array.from([0xe2, 0x82]) };
          const mine = outputFrameInScratch(h, data);
          assert.deepEqual(Buffer.from(mine), Buffer.from(encodeOutputFrame(h, data)));
          const d = decodeOutputFrame(mine)!;
          assert.deepEqual({ ...d, carry: [...d.carry], data: [...d.data] }, { ...h, carry: [0xe2, 0x82], data: [...data] });
        },
      ),
      { numRuns: 50 },
    );
  });
});
