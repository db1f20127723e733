/**
 * The generated static code: every oneof variant of both envelopes survives encode/decode with
 * every field kind, 64-bit values come back as numbers, the compatibility rules of
 * proto/README.md hold (unknown fields and oneof members are ignored, unknown enum values kept),
 * and hostile bytes never do worse than throw a catchable error.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type protobuf from 'protobufjs';
import { v1 } from '../../../proto/index.js';
import { COMPARE, loadContract, messageArbitrary, oneofMembers } from './contract-arbitraries.js';

interface StaticCodec {
  encode(message: object): { finish(): Uint8Array };
  decode(bytes: Uint8Array): object;
  fromObject(object: Record<string, unknown>): object;
  toObject(message: object, options?: protobuf.IConversionOptions): Record<string, unknown>;
  verify(message: Record<string, unknown>): string | null;
}

const contract = loadContract();
const codecs = v1 as unknown as Record<string, StaticCodec>;

function codec(name: string): StaticCodec {
  const c = codecs[name];
  if (c === undefined) throw new Error(`no generated class ${name}`);
  return c;
}

function reflect(name: string): protobuf.Type {
  return contract.lookupType(`svc.sandbox.v1.${name}`);
}

/** encode → decode with the static code gives what was put in. */
function assertRoundTrip(name: string, value: Record<string, unknown>): object {
  const c = codec(name);
  const decoded = c.decode(c.encode(value).finish());
  assert.deepStrictEqual(c.toObject(decoded, COMPARE), c.toObject(c.fromObject(value), COMPARE));
  return decoded;
}

const ENVELOPES = [
  ['AgentMessage', 'payload'],
  ['ManagementMessage', 'payload'],
  ['PtyControl', 'action'],
] as const;

for (const [envelope, oneofName] of ENVELOPES) {
  void describe(`${envelope} round trip, every ${oneofName} variant`, () => {
    for (const member of oneofMembers(reflect(envelope), oneofName)) {
      void test(`${member.name} (${member.type})`, () => {
        const arb = fc.record({ [member.name]: messageArbitrary(member.resolvedType as protobuf.Type) });
        fc.assert(
          fc.property(arb, (value) => {
            const decoded = assertRoundTrip(envelope, value) as Record<string, unknown>;
            assert.equal(decoded[oneofName], member.name, 'the oneof names the variant that was sent');
          }),
          { numRuns: 60 },
        );
      });
    }
  });
}

void describe('Exec messages round trip', () => {
  for (const name of ['ExecRequest', 'ExecOutput']) {
    void test(name, () => {
      fc.assert(
        fc.property(messageArbitrary(reflect(name)), (value) => void assertRoundTrip(name, value)),
        { numRuns: 100 },
      );
    });
  }
});

void describe('values as the rest of the code sees them', () => {
  void test('64-bit fields decode as numbers, exact up to 2^53 - 1', () => {
    const max = Number.MAX_SAFE_INTEGER;
    const bytes = v1.AgentMessage.encode({
      stdout: { streamId: 'cmd-1', data: Buffer.from('hello'), timestampMs: 1_700_000_000_123, seq: max, offset: 2 ** 40 + 7 },
    }).finish();
    const chunk = v1.AgentMessage.decode(bytes).stdout;
    assert.ok(chunk);
    assert.equal(chunk.seq, max);
    assert.equal(chunk.offset, 2 ** 40 + 7);
    assert.equal(chunk.timestampMs, 1_700_000_000_123);
    assert.equal(Buffer.from(chunk.data ?? []).toString(), 'hello');
  });

  void test('absent 64-bit fields read as the number 0, not a Long', () => {
    const hb = v1.Heartbeat.decode(v1.Heartbeat.encode({ agentId: 'a' }).finish());
    assert.equal(hb.timestampMs, 0);
    assert.equal(typeof hb.uptimeSeconds, 'number');
  });

  void test('negative exit codes and 128+signal survive', () => {
    for (const exitCode of [-1, 0, 1, 137, 143]) {
      const r = v1.CommandResult.decode(v1.CommandResult.encode({ commandId: 'c', exitCode }).finish());
      assert.equal(r.exitCode, exitCode);
    }
  });
});

void describe('compatibility rules (proto/README.md)', () => {
  /** Appends a length-delimited field `fieldNumber` holding `payload` to `bytes`. */
  function withUnknownField(bytes: Uint8Array, fieldNumber: number, payload: Uint8Array): Uint8Array {
    const w = v1.Ping.encode({}); // any writer: start from an empty message
    w.uint32((fieldNumber << 3) | 2).bytes(payload);
    return Buffer.concat([bytes, w.finish()]);
  }

  void test('an unknown field inside a known message is ignored', () => {
    const bytes = v1.Heartbeat.encode({ agentId: 'agent-01', runningCommands: 2 }).finish();
    const hb = v1.Heartbeat.decode(withUnknownField(bytes, 99, Buffer.from('from the future')));
    assert.equal(hb.agentId, 'agent-01');
    assert.equal(hb.runningCommands, 2);
  });

  void test('a new oneof member from a newer peer decodes as "no payload", not an error', () => {
    const future = withUnknownField(new Uint8Array(0), 42, v1.Ping.encode({ timestampMs: 5 }).finish());
    const msg = v1.ManagementMessage.decode(future);
    assert.equal(msg.payload, undefined);
    const msg2 = v1.AgentMessage.decode(future);
    assert.equal(msg2.payload, undefined);
  });

  void test('an enum value this side does not know is kept as its number', () => {
    const w = v1.Heartbeat.encode({ agentId: 'a' });
    w.uint32((3 << 3) | 0).int32(99); // status = 99
    const hb = v1.Heartbeat.decode(w.finish());
    assert.equal(hb.status, 99);
  });

  void test('enum zero is the unspecified value', () => {
    assert.equal(v1.AgentStatus.AGENT_STATUS_UNSPECIFIED, 0);
    assert.equal(v1.SessionType.SESSION_TYPE_UNSPECIFIED, 0);
    assert.equal(v1.ExecOutput.Stream.STREAM_UNSPECIFIED, 0);
    assert.equal(v1.ExecOutput.Stream.STREAM_STDOUT, 1);
    assert.equal(v1.ExecOutput.Stream.STREAM_STDERR, 2);
  });
});

void describe('hostile bytes', () => {
  const TARGETS = ['AgentMessage', 'ManagementMessage', 'ExecRequest', 'ExecOutput'];

  /** Decoding either returns a message or throws an Error the caller can catch. */
  function decodeSafely(name: string, bytes: Uint8Array): void {
    const c = codec(name);
    let decoded: object;
    try {
      decoded = c.decode(bytes);
    } catch (err) {
      assert.ok(err instanceof Error, `decode threw a non-Error: ${String(err)}`);
      return;
    }
    // Whatever decoded must also be usable: converting it must not throw.
    c.toObject(decoded, COMPARE);
  }

  for (const name of TARGETS) {
    void test(`${name}: random bytes never crash the decoder`, () => {
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 512 }), (bytes) => decodeSafely(name, bytes)),
        { numRuns: 2000 },
      );
    });

    void test(`${name}: mutated valid messages never crash the decoder`, () => {
      const c = codec(name);
      const valid = messageArbitrary(reflect(name)).map((v) => c.encode(v).finish());
      const mutated = fc
        .tuple(valid, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }), fc.nat())
        .map(([bytes, edits, cut]) => {
          const out = Buffer.from(bytes);
          for (const [at, value] of edits) if (out.length > 0) out[at % out.length] = value;
          return out.subarray(0, out.length === 0 ? 0 : cut % (out.length + 1));
        });
      fc.assert(
        fc.property(mutated, (bytes) => decodeSafely(name, bytes)),
        { numRuns: 1000 },
      );
    });
  }

  void test('a length prefix pointing past the end throws a catchable error', () => {
    // field 1 (registration), wire type 2, declared length 2^28, no payload
    const bytes = Buffer.from([0x0a, 0x80, 0x80, 0x80, 0x80, 0x01]);
    assert.throws(() => v1.AgentMessage.decode(bytes), RangeError);
  });
});
