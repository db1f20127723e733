import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  BINDING_URI,
  CLOSE_CODES,
  ERROR_CODES,
  PTY_EXTENSIONS_URI,
  SESSION_ERROR_CODES,
  SUPPORTED_OPERATIONS,
  A2A_CLIENT_OPS,
  type ErrorCode,
} from '../../../../src/sessions/binding/codes.js';
import {
  closedFrame,
  errorFrame,
  goodbyeFrame,
  helloFrame,
  keyframeFrame,
  membershipChangedFrame,
  outputFrame,
  pingFrame,
  pongFrame,
  resizeFrame,
  roleAssignedFrame,
  sessionErrorFrame,
  toText,
} from '../../../../src/sessions/binding/encode.js';
import type { BindingHelloPayload, ServerFrame } from '../../../../src/sessions/binding/frames.js';
import { UUID_V7, isRfc3339, newFrameId } from '../../../../src/sessions/binding/values.js';
import { assertValid, validateAny, validateClient, validateServer } from './schema-kit.js';

const hello: Omit<BindingHelloPayload, 'binding_uri' | 'binding_version'> = {
  supported_operations: [...SUPPORTED_OPERATIONS],
  activated_extensions: [PTY_EXTENSIONS_URI],
  session: { session_id: 'sess-01', current_sequence: 248, agent_id: 'agent-01', session_backend: 'tmux', session_class: 'managed' },
  session_host: {
    default_backend: 'tmux',
    default_class: 'managed',
    supported_backends: ['native', 'tmux', 'screen'],
    supported_classes: ['direct', 'managed'],
    pairs: [
      { session_backend: 'native', session_class: 'direct', available: true },
      { session_backend: 'tmux', session_class: 'managed', available: true },
      { session_backend: 'screen', session_class: 'managed', available: true },
      { session_backend: 'zellij', session_class: 'managed', available: false, reason: 'zellij is not packaged for the guest' },
    ],
    observe_supported: true,
    drive_supported: true,
    reattach_supported: true,
  },
  payload_modes: {
    subprotocol: 'pty-ws.v1.binary',
    binary: true,
    json_subprotocol: 'pty-ws.v1',
    binary_subprotocol: 'pty-ws.v1.binary',
    max_input_bytes: 65536,
    max_frame_bytes: 131072,
  },
  extension_params: {
    [PTY_EXTENSIONS_URI]: {
      max_controllers: 1,
      max_observers: 32,
      keyframe_interval_seconds: 5,
      keyframe_interval_frames: 100,
      replay_buffer_frames: 1000,
      replay_buffer_retention_seconds: 86400,
      default_cols: 120,
      default_rows: 30,
    },
  },
  server_info: { name: 'sandboxd', version: '0.1.0' },
};

/** One of every server frame the encoders make. */
function everyServerFrame(): [string, ServerFrame][] {
  return [
    ['binding_hello', helloFrame(hello)],
    ['Output stdout', outputFrame(1, new TextEncoder().encode('ls -la\r\n'))],
    ['Output stderr, empty', outputFrame(2, new Uint8Array(0), 'stderr')],
    ['Output log', outputFrame(3, Uint8Array.of(0, 255, 27), 'log')],
    ['Resize', resizeFrame(4, 140, 40)],
    ['RoleAssigned', roleAssignedFrame(5, { role: 'controller', clientId: 'c-1' })],
    [
      'RoleAssigned downgraded',
      roleAssignedFrame(6, { role: 'observer', clientId: 'c-2', downgraded: true, reason: 'max_controllers reached' }),
    ],
    ['MembershipChanged', membershipChangedFrame(7, [{ client_id: 'c-1', label: 'alice@laptop' }], [{ client_id: 'c-2' }])],
    ['MembershipChanged empty', membershipChangedFrame(8, [], [])],
    ['Keyframe', keyframeFrame(9, { snapshot: new TextEncoder().encode('\x1b[H\x1b[2J$ '), cols: 120, rows: 30, anchorSequence: 8 })],
    [
      'Keyframe other format',
      keyframeFrame(10, { snapshot: new Uint8Array(3), cols: 1, rows: 1, anchorSequence: 0, format: 'xterm-serialize-v1' }),
    ],
    ['Closed', closedFrame(11, 0, 'normal')],
    ['Closed unknown exit', closedFrame(12, null, 'killed', 'SIGKILL after 5 s')],
    ...SESSION_ERROR_CODES.map((c, i): [string, ServerFrame] => [`session Error ${c}`, sessionErrorFrame(13 + i, c, 'detail')]),
    ...(Object.keys(ERROR_CODES) as ErrorCode[]).map((c): [string, ServerFrame] => [
      `Error ${c}`,
      errorFrame({ code: c, message: `${c} happened`, requestId: 'req-9' }),
    ]),
    ['Error without request id, in sequence', errorFrame({ code: 'INTERNAL', message: 'boom', sequence: 40 })],
    ['binding_goodbye', goodbyeFrame('session_closed')],
    ['binding_goodbye with detail', goodbyeFrame('other', 'slow consumer')],
    ['ping', pingFrame()],
    ['pong', pongFrame('01hw8q-ping', '2026-05-09T14:30:00.000Z')],
  ];
}

describe('pty-ws.v1 server encoders', () => {
  for (const [name, frame] of everyServerFrame()) {
    test(`${name} validates against the schema`, () => {
      const wire = JSON.parse(toText(frame)) as unknown;
      assertValid(validateServer, wire);
      assertValid(validateAny, wire);
      // ping and pong have one shape in both directions; every other server frame is no client frame.
      if (frame.op !== 'ping' && frame.op !== 'pong') assert.equal(validateClient(wire), false, 'a server frame is no client frame');
      assert.ok(isRfc3339(frame.ts));
    });
  }

  test('fresh ids are UUIDv7 in time order by millisecond; answers echo the request id', () => {
    for (const [name, frame] of everyServerFrame()) {
      if (frame.op === 'Error' && name !== 'Error without request id, in sequence') assert.equal(frame.id, 'req-9', name);
      else if (frame.op === 'pong') assert.equal(frame.id, '01hw8q-ping');
      else assert.match(frame.id, UUID_V7, name);
    }
    assert.ok(newFrameId(1_000) < newFrameId(2_000));
    assert.equal(newFrameId(0x0123456789ab).slice(0, 13), '01234567-89ab');
  });

  test('sequence: 0 on binding_hello, the passed one on session frames, none on goodbye/ping/pong', () => {
    const h = helloFrame(hello);
    assert.equal(h.sequence, 0);
    assert.equal(h.payload.session.current_sequence, 248);
    assert.equal(h.payload.binding_uri, BINDING_URI);
    assert.equal(h.payload.binding_version, '1.0.0');
    assert.equal(outputFrame(77, new Uint8Array(1)).sequence, 77);
    for (const f of [goodbyeFrame('server_shutdown'), pingFrame(), pongFrame('x', h.ts), errorFrame({ code: 'INTERNAL', message: 'm' })]) {
      assert.equal('sequence' in f, false, f.op);
    }
  });

  test('a replayed frame keeps its original id and time', () => {
    const f = outputFrame(401, new Uint8Array(1), 'stdout', { id: 'orig', ts: '2026-05-09T14:42:18.001Z' });
    assert.equal(f.id, 'orig');
    assert.equal(f.ts, '2026-05-09T14:42:18.001Z');
  });

  test('Error frames carry the A2A mapping and retryable flag', () => {
    const denied = errorFrame({ code: 'PERMISSION_DENIED', message: 'observers cannot send pty.session_input', requestId: 'r' });
    assert.deepEqual(denied.payload, {
      code: 'PERMISSION_DENIED',
      message: 'observers cannot send pty.session_input',
      a2a_error: { type: 'PermissionDenied' },
      retryable: false,
    });
    assert.equal(errorFrame({ code: 'REPLAY_OUT_OF_RANGE', message: 'm' }).payload.a2a_error, null);
    assert.equal(errorFrame({ code: 'RATE_LIMITED', message: 'm' }).payload.retryable, true);
  });

  test('Output carries base64 of the exact bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), fc.nat({ max: Number.MAX_SAFE_INTEGER }), (bytes, seq) => {
        const f = outputFrame(seq, bytes);
        assert.equal(f.payload.kind, 'Output');
        if (f.payload.kind === 'Output') assert.deepEqual(new Uint8Array(Buffer.from(f.payload.data, 'base64')), bytes);
        assertValid(validateServer, JSON.parse(toText(f)));
      }),
      { numRuns: 200 },
    );
  });

  test('the published server frames (other than binding_hello, which carries more here) fit the schema', () => {
    const published: unknown[] = [
      {
        op: 'pty.session_frame',
        id: '01hw8q3r1q0a8m7r9z3b4tc5xu',
        ts: '2026-05-09T14:30:00.180Z',
        sequence: 1,
        payload: { kind: 'RoleAssigned', role: 'controller', client_id: 'c-alice-7f3a' },
      },
      {
        op: 'pty.session_frame',
        id: '01hw8qj1b4a8m7r9z3b4tc6a3',
        ts: '2026-05-09T14:35:00.111Z',
        sequence: 250,
        payload: {
          kind: 'MembershipChanged',
          controllers: [{ client_id: 'c-alice-7f3a', label: 'alice@laptop' }],
          observers: [{ client_id: 'c-bob-9f1e', label: 'bob@review' }],
        },
      },
      {
        op: 'pty.session_frame',
        id: '01hw8qj4a6a8m7r9z3b4tc6a5',
        ts: '2026-05-09T14:35:03.200Z',
        sequence: 252,
        payload: { kind: 'Output', stream: 'stdout', data: 'ZWNobyBoZWxsbwo=' },
      },
      {
        op: 'pty.session_frame',
        id: '01hw8q3y4e0a8m7r9z3b4tc5y4',
        ts: '2026-05-09T14:30:05.020Z',
        sequence: 6,
        payload: { kind: 'Resize', cols: 140, rows: 40 },
      },
      {
        op: 'Error',
        id: '01hw8qj7d7a8m7r9z3b4tc6a6',
        ts: '2026-05-09T14:35:10.005Z',
        payload: {
          code: 'PERMISSION_DENIED',
          message: 'observers cannot send pty.session_input',
          a2a_error: { type: 'PermissionDenied' },
          retryable: false,
        },
      },
      {
        op: 'Error',
        id: '01hw8qm117a8m7r9z3b4tc6b1',
        ts: '2026-05-09T14:42:25.115Z',
        payload: {
          code: 'REPLAY_OUT_OF_RANGE',
          message: 'replay_from=25 precedes oldest retained frame (sequence=50)',
          a2a_error: null,
          retryable: false,
        },
      },
      { op: 'binding_goodbye', id: '01hw8q4320a8m7r9z3b4tc5y7', ts: '2026-05-09T14:31:30.011Z', payload: { reason: 'session_closed' } },
    ];
    for (const f of published) assertValid(validateServer, f);
  });
});

describe('pty-ws.v1 tables', () => {
  test('close codes: the published ones and the additions', () => {
    assert.deepEqual(
      Object.values(CLOSE_CODES).sort((a, b) => a - b),
      [1000, 1001, 1011, 4400, 4401, 4403, 4404, 4413, 4429],
    );
  });

  test('supported_operations leaves the A2A core ops out', () => {
    for (const op of A2A_CLIENT_OPS) assert.equal(SUPPORTED_OPERATIONS.includes(op), false, op);
    assert.ok(SUPPORTED_OPERATIONS.length >= 6, 'the published hello schema wants at least six');
  });
});
