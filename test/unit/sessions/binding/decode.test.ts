import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { LIMITS, PTY_EXTENSIONS_URI } from '../../../../src/sessions/binding/codes.js';
import { decodeClientFrame } from '../../../../src/sessions/binding/decode.js';
import { clientFrame, toText } from '../../../../src/sessions/binding/encode.js';
import type { ClientFrame } from '../../../../src/sessions/binding/frames.js';
import { assertValid, validateClient } from './schema-kit.js';

/** The client frames of the published pty-extensions/v1 examples (controller-attach, observer-mid-session-join, reconnect-replay). */
const publishedClientFrames: Record<string, unknown> = {
  'controller-attach join': {
    op: 'pty.join_session',
    id: '01hw8q3q5y0a8m7r9z3b4tc5xt',
    ts: '2026-05-09T14:30:00.150Z',
    extensions: [PTY_EXTENSIONS_URI],
    service_parameters: { trace_id: '00-1234567890abcdef1234567890abcdef-aabbccddeeff0011-01' },
    payload: { role: 'controller', cols: 120, rows: 30, client_label: 'alice@laptop' },
  },
  'controller-attach input': {
    op: 'pty.session_input',
    id: '01hw8q3v3a0a8m7r9z3b4tc5y0',
    ts: '2026-05-09T14:30:02.500Z',
    payload: { data: 'bHMgLWxhCg==' },
  },
  'controller-attach resize': {
    op: 'pty.session_resize',
    id: '01hw8q3y4d0a8m7r9z3b4tc5y3',
    ts: '2026-05-09T14:30:05.000Z',
    payload: { cols: 140, rows: 40 },
  },
  'controller-attach leave': { op: 'pty.leave_session', id: '01hw8q42z00a8m7r9z3b4tc5y5', ts: '2026-05-09T14:31:30.000Z', payload: {} },
  'observer join': {
    op: 'pty.join_session',
    id: '01hw8qj175a8m7r9z3b4tc6a1',
    ts: '2026-05-09T14:35:00.080Z',
    extensions: [PTY_EXTENSIONS_URI],
    service_parameters: { trace_id: '00-aabbccddeeff00112233445566778899-1122334455667788-01' },
    payload: { role: 'observer', client_label: 'bob@review' },
  },
  'observer input (refused later, by role)': {
    op: 'pty.session_input',
    id: '01hw8qj7d7a8m7r9z3b4tc6a6',
    ts: '2026-05-09T14:35:10.000Z',
    payload: { data: 'ZXZpbAo=' },
  },
  'observer leave': { op: 'pty.leave_session', id: '01hw8qjz188a8m7r9z3b4tc6a7', ts: '2026-05-09T14:40:00.000Z', payload: {} },
  'reconnect join with replay_from': {
    op: 'pty.join_session',
    id: '01hw8qm117a8m7r9z3b4tc6b1',
    ts: '2026-05-09T14:42:25.080Z',
    extensions: [PTY_EXTENSIONS_URI],
    replay_from: 400,
    payload: { role: 'controller', client_label: 'alice@laptop' },
  },
  'spec join with replay_from null': {
    op: 'pty.join_session',
    id: '01hw8q3q5y0a8m7r9z3b4tc5xz',
    ts: '2026-05-09T14:30:00Z',
    replay_from: null,
    payload: { role: 'controller', cols: 120, rows: 30, client_label: 'alice@laptop' },
  },
};

describe('pty-ws.v1 decodeClientFrame: the published examples', () => {
  for (const [name, frame] of Object.entries(publishedClientFrames)) {
    test(name, () => {
      const r = decodeClientFrame(JSON.stringify(frame));
      assert.ok(r.ok, r.ok ? '' : `${r.code}: ${r.message}`);
      assert.deepEqual(r.frame, frame);
      assertValid(validateClient, frame);
    });
  }

  test('session_input decodes its bytes', () => {
    const r = decodeClientFrame(JSON.stringify(publishedClientFrames['controller-attach input']));
    assert.ok(r.ok);
    assert.equal(r.input?.toString('utf8'), 'ls -la\n');
  });

  test('bytes in, bytes out: a Uint8Array of UTF-8 decodes like the string', () => {
    const text = JSON.stringify(publishedClientFrames['observer join']);
    assert.deepEqual(decodeClientFrame(new TextEncoder().encode(text)), decodeClientFrame(text));
  });
});

const base = { id: 'req-1', ts: '2026-05-09T14:30:00.000Z' };
const join = (payload: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  op: 'pty.join_session',
  ...base,
  ...extra,
  payload: { role: 'observer', ...payload },
});

const malformed: [string, string | Record<string, unknown> | unknown[], 'INVALID_REQUEST' | 'UNSUPPORTED_OPERATION', boolean][] = [
  // [name, frame, code, carries the id]
  ['bad JSON', '{"op":', 'INVALID_REQUEST', false],
  ['two objects', '{"op":"ping"}{"op":"ping"}', 'INVALID_REQUEST', false],
  ['an array', [{ op: 'ping' }], 'INVALID_REQUEST', false],
  ['a string', '"pty.join_session"', 'INVALID_REQUEST', false],
  ['null', 'null', 'INVALID_REQUEST', false],
  ['no op', { ...base, payload: {} }, 'INVALID_REQUEST', true],
  ['op not a string', { op: 7, ...base, payload: {} }, 'INVALID_REQUEST', true],
  ['unknown op', { op: 'pty.teleport', ...base, payload: {} }, 'UNSUPPORTED_OPERATION', true],
  ['reference-only verb pty.release_role', { op: 'pty.release_role', ...base, payload: {} }, 'UNSUPPORTED_OPERATION', true],
  ['A2A SendMessage', { op: 'SendMessage', ...base, payload: { message: { role: 'user', parts: [] } } }, 'UNSUPPORTED_OPERATION', true],
  [
    'A2A SubscribeToTask with replay_from',
    { op: 'SubscribeToTask', ...base, replay_from: 3, payload: { task_id: 't' } },
    'UNSUPPORTED_OPERATION',
    true,
  ],
  [
    'A2A UpdateServiceParameters',
    { op: 'UpdateServiceParameters', ...base, payload: { service_parameters: {} } },
    'UNSUPPORTED_OPERATION',
    true,
  ],
  ['push config op', { op: 'SetTaskPushNotificationConfig', ...base, payload: {} }, 'UNSUPPORTED_OPERATION', true],
  ['malformed op name', { op: 'pty join!', ...base, payload: {} }, 'INVALID_REQUEST', true],
  ['server-only op', { op: 'binding_hello', ...base, payload: {} }, 'INVALID_REQUEST', true],
  ['server-only session_frame', { op: 'pty.session_frame', ...base, payload: { kind: 'Output' } }, 'INVALID_REQUEST', true],
  ['missing payload', { op: 'pty.leave_session', ...base }, 'INVALID_REQUEST', true],
  ['payload an array', { op: 'pty.session_resize', ...base, payload: [80, 24] }, 'INVALID_REQUEST', true],
  ['missing id', { op: 'pty.leave_session', ts: base.ts, payload: {} }, 'INVALID_REQUEST', false],
  ['empty id', { op: 'pty.leave_session', id: '', ts: base.ts, payload: {} }, 'INVALID_REQUEST', false],
  ['id with a space', { op: 'pty.leave_session', id: 'a b', ts: base.ts, payload: {} }, 'INVALID_REQUEST', false],
  ['id too long', { op: 'pty.leave_session', id: 'x'.repeat(129), ts: base.ts, payload: {} }, 'INVALID_REQUEST', false],
  ['missing ts', { op: 'pty.leave_session', id: 'req-1', payload: {} }, 'INVALID_REQUEST', true],
  ['ts not RFC 3339', { op: 'pty.leave_session', id: 'req-1', ts: '2026-05-09 14:30', payload: {} }, 'INVALID_REQUEST', true],
  ['ts with month 13', { op: 'pty.leave_session', id: 'req-1', ts: '2026-13-09T14:30:00Z', payload: {} }, 'INVALID_REQUEST', true],
  ['ts on Feb 30', { op: 'pty.leave_session', id: 'req-1', ts: '2026-02-30T14:30:00Z', payload: {} }, 'INVALID_REQUEST', true],
  ['ts as epoch number', { op: 'pty.leave_session', id: 'req-1', ts: 1778337000000, payload: {} }, 'INVALID_REQUEST', true],
  ['client sequence', { op: 'pty.leave_session', ...base, sequence: 4, payload: {} }, 'INVALID_REQUEST', true],
  ['client sequence 0', { op: 'pty.session_input', ...base, sequence: 0, payload: { data: '' } }, 'INVALID_REQUEST', true],
  ['unknown envelope field', { op: 'pty.leave_session', ...base, seq: 1, payload: {} }, 'INVALID_REQUEST', true],
  ['replay_from on input', { op: 'pty.session_input', ...base, replay_from: 1, payload: { data: '' } }, 'INVALID_REQUEST', true],
  ['replay_from negative', join({}, { replay_from: -1 }), 'INVALID_REQUEST', true],
  ['replay_from fractional', join({}, { replay_from: 1.5 }), 'INVALID_REQUEST', true],
  ['replay_from a string', join({}, { replay_from: '400' }), 'INVALID_REQUEST', true],
  ['replay_from in the payload', join({ replay_from: 0 }), 'INVALID_REQUEST', true],
  ['extensions not URIs', join({}, { extensions: ['pty-extensions'] }), 'INVALID_REQUEST', true],
  ['extensions duplicated', join({}, { extensions: [PTY_EXTENSIONS_URI, PTY_EXTENSIONS_URI] }), 'INVALID_REQUEST', true],
  ['service_parameters not an object', join({}, { service_parameters: 'trace' }), 'INVALID_REQUEST', true],
  ['join without role', { op: 'pty.join_session', ...base, payload: {} }, 'INVALID_REQUEST', true],
  ['join with role admin', join({ role: 'admin' }), 'INVALID_REQUEST', true],
  ['join cols 0', join({ cols: 0 }), 'INVALID_REQUEST', true],
  ['join rows 1025', join({ rows: 1025 }), 'INVALID_REQUEST', true],
  ['join label of 129 characters', join({ client_label: 'l'.repeat(129) }), 'INVALID_REQUEST', true],
  ['join unknown field', join({ backend: 'tmux' }), 'INVALID_REQUEST', true],
  ['join backend unknown', join({ session_backend: 'kitty' }), 'INVALID_REQUEST', true],
  ['join class unknown', join({ session_class: 'shared' }), 'INVALID_REQUEST', true],
  ['join argv empty', join({ argv: [] }), 'INVALID_REQUEST', true],
  ['join argv[0] empty', join({ argv: [''] }), 'INVALID_REQUEST', true],
  ['join argv with NUL', join({ argv: ['/bin/echo', 'a\0b'] }), 'INVALID_REQUEST', true],
  ['join argv not strings', join({ argv: ['/bin/sleep', 5] }), 'INVALID_REQUEST', true],
  ['join argv and command', join({ argv: ['/bin/sh'], command: 'true' }), 'INVALID_REQUEST', true],
  ['join env value a number', join({ env: { N: 1 } }), 'INVALID_REQUEST', true],
  ['join env name with =', join({ env: { 'A=B': 'x' } }), 'INVALID_REQUEST', true],
  ['join env an array', join({ env: [['A', 'B']] }), 'INVALID_REQUEST', true],
  ['join cwd empty', join({ cwd: '' }), 'INVALID_REQUEST', true],
  ['join terminal_size rows 0', join({ terminal_size: { cols: 80, rows: 0 } }), 'INVALID_REQUEST', true],
  ['join terminal_size extra field', join({ terminal_size: { cols: 80, rows: 24, px: 1 } }), 'INVALID_REQUEST', true],
  ['input data missing', { op: 'pty.session_input', ...base, payload: {} }, 'INVALID_REQUEST', true],
  ['input data not base64', { op: 'pty.session_input', ...base, payload: { data: 'ls -la' } }, 'INVALID_REQUEST', true],
  ['input data unpadded', { op: 'pty.session_input', ...base, payload: { data: 'bHMgLWxhCg' } }, 'INVALID_REQUEST', true],
  ['input data url-safe alphabet', { op: 'pty.session_input', ...base, payload: { data: '-_8=' } }, 'INVALID_REQUEST', true],
  ['input data non-canonical bits', { op: 'pty.session_input', ...base, payload: { data: 'bHMgLWxhCh==' } }, 'INVALID_REQUEST', true],
  ['input data bytes', { op: 'pty.session_input', ...base, payload: { data: [108, 115] } }, 'INVALID_REQUEST', true],
  [
    'input over the byte limit',
    { op: 'pty.session_input', ...base, payload: { data: Buffer.alloc(LIMITS.maxInputBytes + 3).toString('base64') } },
    'INVALID_REQUEST',
    true,
  ],
  ['resize cols 0', { op: 'pty.session_resize', ...base, payload: { cols: 0, rows: 24 } }, 'INVALID_REQUEST', true],
  ['resize missing rows', { op: 'pty.session_resize', ...base, payload: { cols: 80 } }, 'INVALID_REQUEST', true],
  ['resize fractional', { op: 'pty.session_resize', ...base, payload: { cols: 80.5, rows: 24 } }, 'INVALID_REQUEST', true],
  ['resize as strings', { op: 'pty.session_resize', ...base, payload: { cols: '80', rows: '24' } }, 'INVALID_REQUEST', true],
  ['request_role unknown role', { op: 'pty.request_role', ...base, payload: { role: 'owner' } }, 'INVALID_REQUEST', true],
  ['request_keyframe with a field', { op: 'pty.request_keyframe', ...base, payload: { now: true } }, 'INVALID_REQUEST', true],
  ['leave with a field', { op: 'pty.leave_session', ...base, payload: { reason: 'bye' } }, 'INVALID_REQUEST', true],
  ['ping without client_ts', { op: 'ping', ...base, payload: {} }, 'INVALID_REQUEST', true],
  ['pong without server_ts', { op: 'pong', ...base, payload: { client_ts: base.ts } }, 'INVALID_REQUEST', true],
];

const schemaBlind = new Set(['input data non-canonical bits']);

describe('pty-ws.v1 decodeClientFrame: malformed frames', () => {
  for (const [name, frame, code, carriesId] of malformed) {
    test(`${name} → ${code}`, () => {
      const text = typeof frame === 'string' ? frame : JSON.stringify(frame);
      const r = decodeClientFrame(text);
      assert.equal(r.ok, false, `decoded: ${text.slice(0, 200)}`);
      if (r.ok) return;
      assert.equal(r.code, code, r.message);
      assert.equal(r.id, carriesId ? 'req-1' : undefined);
      assert.ok(r.message.length > 0);
      // The schema agrees that an invalid request is no client frame (canonical base64 is beyond a pattern).
      if (code === 'INVALID_REQUEST' && typeof frame !== 'string' && !schemaBlind.has(name)) assert.equal(validateClient(frame), false);
    });
  }

  test('a frame larger than the limit is refused before parsing', () => {
    const r = decodeClientFrame(' '.repeat(LIMITS.maxClientFrameBytes + 1));
    assert.ok(!r.ok && r.code === 'INVALID_REQUEST' && /bytes/.test(r.message));
  });

  test('null payload counts as {} where nothing is required', () => {
    const r = decodeClientFrame(JSON.stringify({ op: 'pty.request_keyframe', ...base, payload: null }));
    assert.ok(r.ok);
    assert.deepEqual(r.frame.payload, {});
  });

  test('an env variable named __proto__ stays a variable', () => {
    const r = decodeClientFrame(
      `{"op":"pty.join_session","id":"j","ts":"2026-05-09T14:30:00Z","payload":{"role":"controller","env":{"__proto__":"x"}}}`,
    );
    assert.ok(r.ok && r.frame.op === 'pty.join_session');
    assert.deepEqual(Object.entries(r.frame.payload.env ?? {}), [['__proto__', 'x']]);
  });

  test('ts is accepted in any offset and precision, with a leap second', () => {
    for (const ts of ['2026-05-09T14:30:00+02:00', '2026-05-09t14:30:00.123456789z', '2016-12-31T23:59:60Z', '2024-02-29T00:00:00-00:00']) {
      const r = decodeClientFrame(JSON.stringify({ op: 'pty.leave_session', id: 'x', ts, payload: {} }));
      assert.ok(r.ok, ts);
    }
  });

  test('a join carrying the spec 4.2 selection decodes', () => {
    const frame = join({
      role: 'controller',
      session_backend: 'native',
      session_class: 'direct',
      argv: ['/bin/bash', '-l', ''],
      cwd: '/home/agent',
      env: { TERM: 'xterm-256color', LANG: '' },
      terminal_size: { cols: 132, rows: 43 },
    });
    const r = decodeClientFrame(JSON.stringify(frame));
    assert.ok(r.ok, r.ok ? '' : r.message);
    assert.deepEqual(r.frame, frame);
    assertValid(validateClient, frame);
    const cmd = join({ role: 'controller', session_backend: 'tmux', session_class: 'managed', command: 'htop' });
    assert.ok(decodeClientFrame(JSON.stringify(cmd)).ok);
    assertValid(validateClient, cmd);
  });
});

// ---------------------------------------------------------------------------------------------

const ts = fc
  .date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true })
  .map((d) => d.toISOString());
const id = fc.stringMatching(/^[\x21-\x7e]{1,128}$/);
const dim = fc.integer({ min: 1, max: LIMITS.maxTerminalDim });
const role = fc.constantFrom('controller' as const, 'observer' as const);
const noNul = (min: number, max: number): fc.Arbitrary<string> =>
  fc.string({ minLength: min, maxLength: max }).filter((s) => !s.includes('\0'));
const joinPayload = fc.record(
  {
    role,
    cols: dim,
    rows: dim,
    client_label: fc.string({ maxLength: LIMITS.maxLabelChars }),
    session_backend: fc.constantFrom('native' as const, 'tmux' as const, 'screen' as const, 'zellij' as const),
    session_class: fc.constantFrom('direct' as const, 'managed' as const),
    argv: fc.tuple(noNul(1, 20), fc.array(noNul(0, 20), { maxLength: 5 })).map(([a, rest]) => [a, ...rest]),
    cwd: noNul(1, 40),
    env: fc.dictionary(fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,15}$/), noNul(0, 20), { maxKeys: 5 }),
    terminal_size: fc.record({ cols: dim, rows: dim }),
  },
  { requiredKeys: ['role'] },
);
const envelope = fc.record(
  {
    replay_from: fc.option(fc.nat({ max: Number.MAX_SAFE_INTEGER }), { nil: null }),
    service_parameters: fc.record({ trace_id: fc.string({ maxLength: 60 }) }),
    extensions: fc.uniqueArray(fc.webUrl(), { maxLength: 3 }),
  },
  { requiredKeys: [] },
);
const clientFrames: fc.Arbitrary<ClientFrame> = fc.oneof(
  fc
    .tuple(id, ts, envelope, joinPayload)
    .map(([i, t, e, payload]): ClientFrame => ({ op: 'pty.join_session', id: i, ts: t, ...e, payload })),
  fc
    .tuple(id, ts, fc.uint8Array({ maxLength: 512 }))
    .map(([i, t, b]): ClientFrame => ({ op: 'pty.session_input', id: i, ts: t, payload: { data: Buffer.from(b).toString('base64') } })),
  fc
    .tuple(id, ts, dim, dim)
    .map(([i, t, cols, rows]): ClientFrame => ({ op: 'pty.session_resize', id: i, ts: t, payload: { cols, rows } })),
  fc.tuple(id, ts, role).map(([i, t, r]): ClientFrame => ({ op: 'pty.request_role', id: i, ts: t, payload: { role: r } })),
  fc.tuple(id, ts).map(([i, t]): ClientFrame => ({ op: 'pty.request_keyframe', id: i, ts: t, payload: {} })),
  fc.tuple(id, ts).map(([i, t]): ClientFrame => ({ op: 'pty.leave_session', id: i, ts: t, payload: {} })),
  fc.tuple(id, ts, ts).map(([i, t, c]): ClientFrame => ({ op: 'ping', id: i, ts: t, payload: { client_ts: c } })),
  fc.tuple(id, ts, ts, ts).map(([i, t, c, s]): ClientFrame => ({ op: 'pong', id: i, ts: t, payload: { client_ts: c, server_ts: s } })),
);

describe('pty-ws.v1 client frames: encode → decode round-trips', () => {
  test('any valid client frame decodes to itself and satisfies the schema', () => {
    fc.assert(
      fc.property(clientFrames, (frame) => {
        const plain = JSON.parse(JSON.stringify(frame)) as unknown;
        const r = decodeClientFrame(toText(frame));
        assert.ok(r.ok, r.ok ? '' : `${r.code}: ${r.message}`);
        assert.deepEqual(r.frame, plain);
        assertValid(validateClient, plain);
        if (r.frame.op === 'pty.session_input') assert.equal(r.input?.toString('base64'), r.frame.payload.data);
      }),
      { numRuns: 500 },
    );
  });

  test('clientFrame stamps a UUIDv7 id and the current time', () => {
    const f = clientFrame(
      'pty.join_session',
      { role: 'controller', cols: 80, rows: 24 },
      { replay_from: 12, extensions: [PTY_EXTENSIONS_URI] },
    );
    const r = decodeClientFrame(toText(f));
    assert.ok(r.ok);
    assert.deepEqual(r.frame, f);
    assert.match(f.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.ok(Math.abs(Date.parse(f.ts) - Date.now()) < 5000);
  });
});
