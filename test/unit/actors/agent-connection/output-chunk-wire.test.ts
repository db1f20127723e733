/**
 * The agent actor's fast path for output chunks (output-chunk-wire.ts) reads exactly what
 * protobufjs decodes, or declines: fuzzed over well-formed chunks (any field values, fields in
 * any order, some absent) and over arbitrary bytes and mutations of real messages.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { v1 } from '../../../../proto/index.js';
import { OutputStream } from '../../../../actors/protocol/agent-frames.js';
import { OutputChunkReader } from '../../../../actors/agent-connection/output-chunk-wire.js';

const MEMBERS = ['stdout', 'stderr', 'log'] as const;

/** protobufjs's reading of a lone output chunk, in the fast path's terms; null for anything else. */
function reference(
  bytes: Uint8Array,
): { stream: number; streamId: string; data: number[]; timestampMs: number; eof: boolean; seq: number; offset: number } | null {
  let m: v1.AgentMessage;
  try {
    m = v1.AgentMessage.decode(bytes);
  } catch {
    return null;
  }
  const member = m.payload;
  if (member !== 'stdout' && member !== 'stderr' && member !== 'log') return null;
  const c = m[member]!;
  return {
    stream: OutputStream[member],
    streamId: c.streamId ?? '',
    data: [...(c.data ?? [])],
    timestampMs: Number(c.timestampMs),
    eof: c.eof === true,
    seq: Number(c.seq),
    offset: Number(c.offset),
  };
}

/** Reads `bytes` the way the actor does: fast path, else protobufjs (which teaches the reader the id). */
function viaReader(reader: OutputChunkReader, bytes: Uint8Array): ReturnType<typeof reference> | 'declined' {
  const c = reader.read(bytes);
  if (c === null) {
    const ref = reference(bytes);
    if (ref !== null) reader.learn(bytes, ref.streamId);
    return 'declined';
  }
  return {
    stream: c.stream,
    streamId: c.streamId,
    data: [...c.data],
    timestampMs: c.timestampMs,
    eof: c.eof,
    seq: c.seq,
    offset: c.offset,
  };
}

const int64 = fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 }), fc.maxSafeInteger(), fc.constant(-1), fc.constant(2 ** 53 - 1));
const chunkArb = fc.record(
  {
    streamId: fc.oneof(
      fc.constantFrom('cmd-1', 'cmd-2', 'ingest-0-1', ''),
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 8 }),
    ),
    data: fc.uint8Array({ maxLength: 300 }),
    timestampMs: int64,
    eof: fc.boolean(),
    seq: fc.oneof(fc.nat(), fc.maxSafeNat()),
    offset: fc.oneof(fc.nat(), fc.maxSafeNat()),
  },
  { requiredKeys: [] },
);

void describe('OutputChunkReader', () => {
  void test('reads what protobufjs reads, once it has seen the command id', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom(...MEMBERS), chunkArb), { minLength: 1, maxLength: 20 }), (messages) => {
        const reader = new OutputChunkReader();
        for (const [member, chunk] of messages) {
          const bytes = v1.AgentMessage.encode({ [member]: chunk }).finish();
          const expected = reference(bytes);
          const first = viaReader(reader, bytes);
          if (first !== 'declined') assert.deepEqual(first, expected);
          // the second time the id is known
          const again = viaReader(reader, bytes);
          assert.deepEqual(again, expected);
        }
      }),
      { numRuns: 300 },
    );
  });

  void test('declines or agrees on arbitrary and mutated bytes, and never throws', () => {
    const reader = new OutputChunkReader();
    const seed = v1.AgentMessage.encode({ stdout: { streamId: 'cmd-1', data: new Uint8Array([1, 2, 3]), seq: 7, offset: 9 } }).finish();
    viaReader(reader, seed);
    const pristine = Uint8Array.from(seed);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 60 }),
          fc.tuple(fc.nat(seed.byteLength - 1), fc.integer({ min: 0, max: 255 })).map(([at, b]) => {
            // a copy (protobufjs hands back a Buffer, whose slice() is a view)
            const m = Uint8Array.from(seed);
            m[at] = b;
            return m;
          }),
          fc.nat(seed.byteLength).map((n) => Uint8Array.from(seed.subarray(0, n))),
        ),
        (bytes) => {
          const got = viaReader(reader, bytes);
          if (got !== 'declined') assert.deepEqual(got, reference(bytes));
        },
      ),
      { numRuns: 2000 },
    );
    assert.deepEqual(seed, Buffer.from(pristine), 'the runs read copies of the seed');
  });

  void test('a remembered command id does not follow later writes to the message it came in', () => {
    // The actor reads messages out of memory that is written again (the ring, grpc-js buffers).
    const reader = new OutputChunkReader();
    const message = Buffer.from(v1.AgentMessage.encode({ stdout: { streamId: 'cmd-1', data: new Uint8Array([1]), seq: 1 } }).finish());
    assert.equal(reader.read(message), null, 'a new command id goes to protobufjs first');
    reader.learn(message, 'cmd-1');
    const reused = Buffer.from(v1.AgentMessage.encode({ stdout: { streamId: 'cmd-2', data: new Uint8Array([2]), seq: 1 } }).finish());
    reused.copy(message); // same length: the old message's memory now holds cmd-2's chunk
    assert.equal(reader.read(message), null, 'cmd-2 was never learned: it must go to protobufjs, not come back as cmd-1');
  });

  void test('declines messages that are not a lone chunk', () => {
    const reader = new OutputChunkReader();
    for (const m of [
      { heartbeat: { agentId: 'a', timestampMs: 1 } },
      { registration: { agentId: 'a' } },
      { outputGap: { commandId: 'c', firstSeq: 1, lastSeq: 2 } },
    ])
      assert.equal(reader.read(v1.AgentMessage.encode(m).finish()), null);
    // two members: protobufjs keeps the last, the fast path leaves it to protobufjs
    const a = v1.AgentMessage.encode({ stdout: { streamId: 'x', seq: 1 } }).finish();
    const b = v1.AgentMessage.encode({ stderr: { streamId: 'x', seq: 2 } }).finish();
    viaReader(reader, a);
    const both = new Uint8Array([...a, ...b]);
    assert.equal(reader.read(both), null);
  });
});
