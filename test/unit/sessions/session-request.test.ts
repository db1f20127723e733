import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { SvcError, type ErrorCode } from '../../../src/core/errors.js';
import { parseCreateSessionBody, parseKillSignal } from '../../../src/sessions/session-request.js';

function code(fn: () => unknown): ErrorCode | 'ok' {
  try {
    fn();
    return 'ok';
  } catch (e) {
    assert.ok(e instanceof SvcError, `not an SvcError: ${String(e)}`);
    return e.code;
  }
}

describe('POST sessions body', () => {
  test('all fields are optional: defaults bash, generated name, tmux/managed', () => {
    for (const body of [undefined, null, {}]) {
      assert.deepEqual(parseCreateSessionBody(body), {
        command: 'bash',
        sessionName: undefined,
        sessionBackend: 'tmux',
        sessionClass: 'managed',
      });
    }
    assert.deepEqual(
      parseCreateSessionBody({ command: 'htop -d 5', session_name: 'Build_1-x', session_backend: 'tmux', session_class: 'managed' }),
      {
        command: 'htop -d 5',
        sessionName: 'Build_1-x',
        sessionBackend: 'tmux',
        sessionClass: 'managed',
      },
    );
    assert.equal(parseCreateSessionBody({ command: 'for i in 1 2; do\n\techo $i\ndone' }).command, 'for i in 1 2; do\n\techo $i\ndone');
  });

  test('backends and classes: tmux/managed only; spec-named backends 501, unknown 400; other classes 501', () => {
    for (const b of ['screen', 'zellij', 'native'])
      assert.equal(
        code(() => parseCreateSessionBody({ session_backend: b })),
        'session_backend.not_implemented',
      );
    assert.equal(
      code(() => parseCreateSessionBody({ session_backend: 'tmuxx' })),
      'request.invalid',
    );
    assert.equal(
      code(() => parseCreateSessionBody({ session_backend: 5 })),
      'request.invalid',
    );
    assert.equal(
      code(() => parseCreateSessionBody({ session_class: 'direct' })),
      'session_class.not_implemented',
    );
    assert.equal(
      code(() => parseCreateSessionBody({ session_class: 'ephemeral' })),
      'session_class.not_implemented',
    );
    assert.equal(
      code(() => parseCreateSessionBody({ session_class: 'Bad Class!' })),
      'request.invalid',
    );
    assert.equal(
      code(() => parseCreateSessionBody({ session_backend: 'screen', session_class: 'direct' })),
      'session_backend.not_implemented',
    );
  });

  test('bad input is 400: unknown fields, wrong types, names, blank or control-character commands', () => {
    const bad: unknown[] = [
      [],
      'bash',
      42,
      { cmd: 'bash' },
      { command: 'bash', cwd: '/' },
      { command: 7 },
      { command: '' },
      { command: '   \n' },
      { command: 'a'.repeat(8193) },
      { command: 'echo \u0000' },
      { command: 'echo \u001b[31m' },
      { session_name: '' },
      { session_name: 'has space' },
      { session_name: 'a.b' },
      { session_name: 'a:b' },
      { session_name: '-lead' },
      { session_name: 'x'.repeat(65) },
      { session_name: 3 },
    ];
    for (const b of bad)
      assert.equal(
        code(() => parseCreateSessionBody(b)),
        'request.invalid',
        JSON.stringify(b),
      );
    assert.equal(
      code(() => parseCreateSessionBody({ command: 'a'.repeat(8192) })),
      'ok',
    );
  });

  test('any JSON value gives a result or a 400/501 SvcError, never another exception (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const c = code(() => parseCreateSessionBody(v));
        assert.ok(['ok', 'request.invalid', 'session_backend.not_implemented', 'session_class.not_implemented'].includes(c));
      }),
    );
  });
});

describe('DELETE signal', () => {
  test('TERM by default; TERM, KILL, INT, HUP in any case with an optional SIG prefix; others 400', () => {
    assert.equal(parseKillSignal(new URLSearchParams('')), 'TERM');
    assert.equal(parseKillSignal(new URLSearchParams('signal=KILL')), 'KILL');
    assert.equal(parseKillSignal(new URLSearchParams('signal=sigint')), 'INT');
    assert.equal(parseKillSignal(new URLSearchParams('signal=Hup')), 'HUP');
    for (const q of ['signal=USR1', 'signal=', 'signal=9', 'signal=TERM&signal=KILL', 'signal=SIGSIGTERM']) {
      assert.equal(
        code(() => parseKillSignal(new URLSearchParams(q))),
        'request.invalid',
        q,
      );
    }
  });
});
