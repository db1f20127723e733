import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  decodeOutputBinary,
  encodeBinaryInput,
  encodeClientFrame,
  encodeOutputBinary,
  encodeOutputJson,
} from '../../../src/sessions/pty-ws-frames.js';
import {
  decodeClientFrame,
  kMaxClientFrameBytes,
  kMaxInputBytes,
  type ClientFrame,
  type JoinFrame,
} from '../../../src/sessions/pty-ws-protocol.js';

const enc = (o: unknown): Uint8Array => new TextEncoder().encode(typeof o === 'string' ? o : JSON.stringify(o));
const decode = (o: unknown): ReturnType<typeof decodeClientFrame> => decodeClientFrame(enc(o), false);

/** Plain JSON data (fast-check builds null-prototype records; undefined fields drop on both sides). */
function plain(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v)) as unknown;
}

function codeOf(o: unknown): string {
  const r = decode(o);
  return r.ok ? 'ok' : r.code;
}

const joinArb: fc.Arbitrary<JoinFrame> = fc.record({
  op: fc.constant('pty.join_session' as const),
  role: fc.option(fc.constantFrom('controller' as const, 'observer' as const), { nil: undefined }),
  sessionBackend: fc.option(fc.string({ maxLength: 32 }), { nil: undefined }),
  sessionClass: fc.option(fc.string({ maxLength: 32 }), { nil: undefined }),
  argv: fc.option(
    fc.array(
      fc.string({ maxLength: 20 }).filter((s) => !s.includes('\0')),
      { minLength: 1, maxLength: 5 },
    ),
    { nil: undefined },
  ),
  cwd: fc.option(
    fc.string({ maxLength: 20 }).map((s) => `/${s.replace(/\0/g, '')}`),
    { nil: undefined },
  ),
  env: fc.option(
    fc.dictionary(
      fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,10}$/),
      fc.string({ maxLength: 20 }).filter((s) => !s.includes('\0')),
      { maxKeys: 5 },
    ),
    { nil: undefined },
  ),
  terminalSize: fc.option(fc.record({ cols: fc.integer({ min: 1, max: 1000 }), rows: fc.integer({ min: 1, max: 1000 }) }), {
    nil: undefined,
  }),
  replayFrom: fc.option(fc.maxSafeNat(), { nil: undefined }),
  binaryOutput: fc.boolean(),
  clientLabel: fc.option(fc.string({ maxLength: 128 }), { nil: undefined }),
});

const frameArb: fc.Arbitrary<ClientFrame> = fc.oneof(
  joinArb,
  fc.uint8Array({ maxLength: 512 }).map((data) => ({ op: 'pty.session_input' as const, data })),
  fc.record({
    op: fc.constant('pty.session_resize' as const),
    cols: fc.integer({ min: 1, max: 1000 }),
    rows: fc.integer({ min: 1, max: 1000 }),
  }),
  fc.record({ op: fc.constant('pty.request_role' as const), role: fc.constantFrom('controller' as const, 'observer' as const) }),
  fc.constant({ op: 'pty.leave_session' as const }),
  fc.record({
    op: fc.constantFrom('ping' as const, 'pong' as const),
    id: fc.option(fc.oneof(fc.string({ maxLength: 64 }), fc.integer()), { nil: undefined }),
  }),
);

describe('pty-ws.v1 client frames', () => {
  test('valid frames decode to their typed form', () => {
    const j = decode({
      op: 'pty.join_session',
      role: 'controller',
      terminal_size: { cols: 120, rows: 40 },
      replay_from: 17,
      binary_output: true,
    });
    assert.ok(j.ok && j.frame.op === 'pty.join_session');
    assert.deepEqual(
      [j.frame.role, j.frame.terminalSize, j.frame.replayFrom, j.frame.binaryOutput],
      ['controller', { cols: 120, rows: 40 }, 17, true],
    );
    const i = decode({ op: 'pty.session_input', data: Buffer.from('ls\r').toString('base64') });
    assert.ok(i.ok && i.frame.op === 'pty.session_input');
    assert.equal(Buffer.from(i.frame.data).toString(), 'ls\r');
    assert.deepEqual(decode({ op: 'pty.session_resize', cols: 100, rows: 30 }), {
      ok: true,
      frame: { op: 'pty.session_resize', cols: 100, rows: 30 },
    });
    assert.deepEqual(decode({ op: 'ping', id: 'x' }), { ok: true, frame: { op: 'ping', id: 'x' } });
    const b = decodeClientFrame(encodeBinaryInput(new Uint8Array([3])), true);
    assert.ok(b.ok && b.frame.op === 'pty.session_input');
    assert.deepEqual([...b.frame.data], [3]);
  });

  test('malformed and invalid frames are refused with a code, never an exception', () => {
    const cases: [unknown, string][] = [
      ['not json', 'malformed_frame'],
      ['[1,2]', 'malformed_frame'],
      ['"op"', 'malformed_frame'],
      [{}, 'unknown_op'],
      [{ op: 'pty.hack' }, 'unknown_op'],
      [{ op: 5 }, 'unknown_op'],
      [{ op: 'pty.leave_session', extra: 1 }, 'invalid_field'],
      [{ op: 'pty.join_session', role: 'admin' }, 'invalid_field'],
      [{ op: 'pty.join_session', terminal_size: { cols: 0, rows: 5 } }, 'invalid_field'],
      [{ op: 'pty.join_session', terminal_size: { cols: 80, rows: 24, x: 1 } }, 'invalid_field'],
      [{ op: 'pty.join_session', terminal_size: [80, 24] }, 'invalid_field'],
      [{ op: 'pty.join_session', replay_from: -1 }, 'invalid_field'],
      [{ op: 'pty.join_session', replay_from: 1.5 }, 'invalid_field'],
      [{ op: 'pty.join_session', argv: [] }, 'invalid_field'],
      [{ op: 'pty.join_session', argv: ['a\u0000'] }, 'invalid_field'],
      [{ op: 'pty.join_session', cwd: 'relative' }, 'invalid_field'],
      [{ op: 'pty.join_session', env: { 'BAD-NAME': 'x' } }, 'invalid_field'],
      [{ op: 'pty.join_session', env: { A: 1 } }, 'invalid_field'],
      [{ op: 'pty.join_session', binary_output: 'yes' }, 'invalid_field'],
      [{ op: 'pty.session_input' }, 'invalid_field'],
      [{ op: 'pty.session_input', data: 'not base64!' }, 'invalid_field'],
      [{ op: 'pty.session_input', data: 'QQ' }, 'invalid_field'],
      [{ op: 'pty.session_input', data: Buffer.alloc(kMaxInputBytes + 3).toString('base64') }, 'invalid_field'],
      [{ op: 'pty.session_resize', cols: 1001, rows: 1 }, 'invalid_field'],
      [{ op: 'pty.session_resize', cols: '80', rows: 24 }, 'invalid_field'],
      [{ op: 'ping', id: { x: 1 } }, 'invalid_field'],
      [{ op: 'ping', id: 'x'.repeat(65) }, 'invalid_field'],
    ];
    for (const [frame, expected] of cases) assert.equal(codeOf(frame), expected, JSON.stringify(frame).slice(0, 80));
    assert.equal((decodeClientFrame(new Uint8Array([0xff, 0xfe]), false) as { code: string }).code, 'malformed_frame');
    assert.equal((decodeClientFrame(new Uint8Array([1, 2, 3, 4, 5]), true) as { code: string }).code, 'malformed_frame');
    assert.equal((decodeClientFrame(new Uint8Array(kMaxClientFrameBytes + 1), false) as { code: string }).code, 'frame_too_large');
    assert.equal(
      (decodeClientFrame(encodeBinaryInput(new Uint8Array(kMaxInputBytes + 1)), true) as { code: string }).code,
      'frame_too_large',
    );
  });

  test('fuzz: arbitrary bytes, strings and JSON never throw', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.boolean(), (bytes, isBinary) => {
        const r = decodeClientFrame(bytes, isBinary);
        assert.equal(typeof r.ok, 'boolean');
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        assert.equal(typeof decode(v).ok, 'boolean');
      }),
      { numRuns: 2000 },
    );
    const opLike = fc.record(
      {
        op: fc.constantFrom(
          'pty.join_session',
          'pty.session_input',
          'pty.session_resize',
          'pty.request_role',
          'pty.leave_session',
          'ping',
          'pong',
        ),
        role: fc.jsonValue(),
        data: fc.jsonValue(),
        cols: fc.jsonValue(),
        rows: fc.jsonValue(),
        terminal_size: fc.jsonValue(),
        env: fc.jsonValue(),
        argv: fc.jsonValue(),
        id: fc.jsonValue(),
        replay_from: fc.jsonValue(),
      },
      { requiredKeys: ['op'] },
    );
    fc.assert(
      fc.property(opLike, (v) => {
        assert.equal(typeof decode(v).ok, 'boolean');
      }),
      { numRuns: 3000 },
    );
  });

  test('fuzz: every valid frame round-trips through encodeClientFrame', () => {
    fc.assert(
      fc.property(frameArb, (f) => {
        const r = decode(encodeClientFrame(f));
        assert.ok(r.ok, r.ok ? '' : r.message);
        if (f.op === 'pty.session_input' && r.frame.op === 'pty.session_input') assert.deepEqual([...r.frame.data], [...f.data]);
        else assert.deepEqual(plain(r.frame), plain(f));
      }),
      { numRuns: 1000 },
    );
  });

  test('output frames: JSON with base64 and the binary PW1O form carry seq and bytes exactly', () => {
    fc.assert(
      fc.property(fc.maxSafeNat(), fc.uint8Array({ maxLength: 200 }), (seq, data) => {
        const j = JSON.parse(encodeOutputJson(seq, data)) as { op: string; seq: number; data: string };
        assert.deepEqual([j.op, j.seq, [...Buffer.from(j.data, 'base64')]], ['pty.output', seq, [...data]]);
        const b = decodeOutputBinary(encodeOutputBinary(seq, data));
        assert.ok(b);
        assert.deepEqual([b.seq, [...b.data]], [seq, [...data]]);
      }),
    );
    assert.equal(decodeOutputBinary(new Uint8Array(5)), null);
  });
});
