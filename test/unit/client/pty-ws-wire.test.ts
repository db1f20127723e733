/**
 * The client's reading of pty-ws.v1 (src/client/pty-ws-wire.ts) against the server's own codec
 * and encoders (src/sessions/binding): both ends of every message agree, under fast-check, and
 * the client's decoder never throws on what it is handed.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  clientFrameText,
  decodeOutputMessage,
  decodeServerMessage,
  encodeInputMessage,
  kMaxInputBytes,
  newRequestId,
  PtyCloseCode,
  PTY_WS_BINARY_SUBPROTOCOL,
  PTY_WS_SUBPROTOCOL,
} from '../../../src/client/pty-ws-wire.js';
import { decodeBinaryInput, encodeBinaryOutput } from '../../../src/sessions/binding/binary.js';
import { CLOSE_CODES, OUTPUT_STREAMS, SUBPROTOCOL_BINARY, SUBPROTOCOL_JSON } from '../../../src/sessions/binding/codes.js';
import { decodeClientFrame } from '../../../src/sessions/binding/decode.js';
import {
  closedFrame,
  errorFrame,
  goodbyeFrame,
  keyframeFrame,
  membershipChangedFrame,
  outputFrame,
  pingFrame,
  pongFrame,
  resizeFrame,
  roleAssignedFrame,
  sessionErrorFrame,
  toText,
} from '../../../src/sessions/binding/encode.js';
import { UUID_V7 } from '../../../src/sessions/binding/values.js';

const bytes = fc.uint8Array({ maxLength: 2048 });
const seq = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
const dim = fc.integer({ min: 1, max: 1024 });

describe('pty-ws.v1 as the client reads it', () => {
  test('the constants are the server binding’s', () => {
    assert.equal(PTY_WS_SUBPROTOCOL, SUBPROTOCOL_JSON);
    assert.equal(PTY_WS_BINARY_SUBPROTOCOL, SUBPROTOCOL_BINARY);
    for (const [name, code] of Object.entries(CLOSE_CODES)) {
      const client = name === 'notFound' ? 'sessionNotFound' : name;
      assert.equal(PtyCloseCode[client as keyof typeof PtyCloseCode], code, name);
    }
  });

  test('PW1O: the server encodes, the client decodes the same sequence, stream and bytes', () => {
    fc.assert(
      fc.property(seq, bytes, fc.constantFrom(...OUTPUT_STREAMS), (s, b, stream) => {
        const m = decodeOutputMessage(encodeBinaryOutput(s, b, stream));
        assert.deepEqual(m, { type: 'output', sequence: s, stream, bytes: b });
      }),
    );
  });

  test('PW1I: the client encodes, the server decodes the same bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: kMaxInputBytes }), (b) => {
        const r = decodeBinaryInput(encodeInputMessage(b));
        assert.ok(r.ok);
        assert.deepEqual(new Uint8Array(r.value), b);
      }),
      { numRuns: 50 },
    );
  });

  test('every server frame the encoders make decodes to its message', () => {
    fc.assert(
      fc.property(seq, bytes, dim, dim, seq, (s, b, cols, rows, anchor) => {
        assert.deepEqual(decodeServerMessage(toText(outputFrame(s, b, 'stderr'))), {
          type: 'output',
          sequence: s,
          stream: 'stderr',
          bytes: b,
        });
        assert.deepEqual(decodeServerMessage(toText(keyframeFrame(s, { snapshot: b, cols, rows, anchorSequence: anchor }))), {
          type: 'keyframe',
          sequence: s,
          snapshot: b,
          format: 'vt100-screen-state-v1',
          cols,
          rows,
          anchorSequence: anchor,
        });
        assert.deepEqual(decodeServerMessage(toText(resizeFrame(s, cols, rows))), { type: 'resize', sequence: s, cols, rows });
      }),
      { numRuns: 200 },
    );
    assert.deepEqual(
      decodeServerMessage(toText(roleAssignedFrame(3, { role: 'observer', clientId: 'c', downgraded: true, reason: 'r' }))),
      {
        type: 'role',
        sequence: 3,
        role: 'observer',
        clientId: 'c',
        downgraded: true,
        reason: 'r',
      },
    );
    assert.deepEqual(decodeServerMessage(toText(membershipChangedFrame(4, [{ client_id: 'a', label: 'alice' }], [{ client_id: 'b' }]))), {
      type: 'membership',
      sequence: 4,
      controllers: [{ client_id: 'a', label: 'alice' }],
      observers: [{ client_id: 'b' }],
    });
    assert.deepEqual(decodeServerMessage(toText(closedFrame(5, null, 'killed', 'SIGKILL'))), {
      type: 'closed',
      sequence: 5,
      exitCode: null,
      reason: 'killed',
      detail: 'SIGKILL',
    });
    assert.deepEqual(decodeServerMessage(toText(sessionErrorFrame(6, 'PTY_WRITE_FAILED', 'EIO'))), {
      type: 'session_error',
      sequence: 6,
      code: 'PTY_WRITE_FAILED',
      message: 'EIO',
    });
    assert.deepEqual(decodeServerMessage(toText(errorFrame({ code: 'INTERNAL', message: 'boom', requestId: 'r-1' }))), {
      type: 'error',
      id: 'r-1',
      code: 'INTERNAL',
      message: 'boom',
      retryable: true,
    });
    assert.deepEqual(decodeServerMessage(toText(goodbyeFrame('server_shutdown'))), {
      type: 'goodbye',
      reason: 'server_shutdown',
      detail: undefined,
    });
    const ping = pingFrame();
    assert.deepEqual(decodeServerMessage(toText(ping)), { type: 'ping', id: ping.id, clientTs: ping.payload.client_ts });
    assert.equal(decodeServerMessage(toText(pongFrame('p-1', '2026-01-01T00:00:00Z'))).type, 'pong');
  });

  test('never throws: anything that is not a frame of the binding is "invalid"', () => {
    const anything = fc.oneof(
      fc.string(),
      fc.json(),
      fc.jsonValue().map((v) => JSON.stringify({ op: 'pty.session_frame', id: 'x', sequence: 1, payload: v })),
      fc
        .record(
          { kind: fc.constantFrom('Output', 'Keyframe', 'Resize', 'RoleAssigned', 'MembershipChanged', 'Nope') },
          { requiredKeys: [] },
        )
        .map((p) => JSON.stringify({ op: 'pty.session_frame', sequence: 2, payload: p })),
      fc.uint8Array({ maxLength: 40 }).map((b) => b.buffer),
      fc.uint8Array({ maxLength: 40 }).map((b) => Uint8Array.of(0x50, 0x57, 0x31, 0x4f, ...b)),
      fc.anything(),
    );
    fc.assert(
      fc.property(anything, (data) => {
        assert.equal(typeof decodeServerMessage(data).type, 'string');
      }),
      { numRuns: 500 },
    );
  });

  test('client frames are what the server decoder accepts; ids are UUIDv7', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('controller' as const, 'observer' as const),
        dim,
        dim,
        fc.string({ minLength: 0, maxLength: 128 }),
        fc.option(seq, { nil: undefined }),
        (role, cols, rows, label, replayFrom) => {
          const text = clientFrameText(
            'pty.join_session',
            { role, cols, rows, client_label: label },
            replayFrom === undefined ? {} : { replayFrom },
          );
          const r = decodeClientFrame(text);
          assert.ok(r.ok, r.ok ? '' : r.message);
          assert.equal(r.frame.op, 'pty.join_session');
          assert.equal(r.frame.replay_from, replayFrom);
          assert.match(r.frame.id, UUID_V7);
        },
      ),
    );
    const at = Date.UTC(2026, 4, 9, 14, 30);
    assert.equal(newRequestId(at).replace(/-/g, '').slice(0, 12), at.toString(16).padStart(12, '0'));
  });
});
