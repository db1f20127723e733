/**
 * The A2A shapes sandboxd reads (src/a2a/wire.ts, routes.ts): messages in the 0.3 and 1.0 forms,
 * what is refused and why, the A2A-Version values and the google.rpc.Status body.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { negotiateVersion } from '../../../src/a2a/routes.js';
import { parseMessage, rpcStatus, v10State } from '../../../src/a2a/wire.js';

describe('A2A wire', () => {
  test('a message in the 0.3 form (kind parts, lowercase role) and the 1.0 form parse to the same text', () => {
    const v03 = parseMessage({
      kind: 'message',
      messageId: 'm1',
      role: 'user',
      parts: [
        { kind: 'text', text: 'echo a' },
        { kind: 'text', text: 'echo b' },
      ],
    });
    const v10 = parseMessage({ messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'echo a' }, { text: 'echo b' }], contextId: 'ctx-1' });
    assert.ok(typeof v03 !== 'string' && typeof v10 !== 'string');
    assert.equal(v03.text, 'echo a\necho b');
    assert.equal(v10.text, v03.text);
    assert.equal(v10.contextId, 'ctx-1');
  });

  test('messages sandboxd cannot run are refused with the reason', () => {
    const cases: [string, unknown, RegExp][] = [
      ['no text part', { messageId: 'm', parts: [{ kind: 'data', data: {} }] }, /no text part/],
      ['agent role', { messageId: 'm', role: 'ROLE_AGENT', parts: [{ text: 'x' }] }, /role/],
      ['no id', { parts: [{ text: 'x' }] }, /messageId/],
      ['empty parts', { messageId: 'm', parts: [] }, /parts/],
      ['blank text', { messageId: 'm', parts: [{ text: '  ' }] }, /empty/],
      ['NUL', { messageId: 'm', parts: [{ text: 'a\0b' }] }, /NUL/],
      ['too long', { messageId: 'm', parts: [{ text: 'x'.repeat(65537) }] }, /longer/],
      ['not an object', 'echo', /object/],
    ];
    for (const [what, m, re] of cases) {
      const r = parseMessage(m);
      assert.equal(typeof r, 'string', what);
      assert.match(r as string, re, what);
    }
  });

  test('A2A-Version: absent, empty or 0.3 → 0.3; 1.0 → 1.0; everything else is refused', () => {
    assert.equal(negotiateVersion(undefined), '0.3');
    assert.equal(negotiateVersion(''), '0.3');
    assert.equal(negotiateVersion('0.3'), '0.3');
    assert.equal(negotiateVersion('1.0'), '1.0');
    for (const v of ['1', '1.0.0', '0.3.0', '2.0', 'v1', '1.0, 0.3']) assert.equal(negotiateVersion(v), null, v);
  });

  test('google.rpc.Status carries the HTTP code, its status name and an ErrorInfo reason; states map to TASK_STATE_*', () => {
    assert.deepEqual(rpcStatus(404, 'TASK_NOT_FOUND', 'no task'), {
      error: {
        code: 404,
        status: 'NOT_FOUND',
        message: 'no task',
        details: [
          { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'TASK_NOT_FOUND', domain: 'a2a-protocol.org', metadata: {} },
        ],
      },
    });
    assert.equal(v10State('input-required'), 'TASK_STATE_INPUT_REQUIRED');
    assert.equal(v10State('canceled'), 'TASK_STATE_CANCELED');
  });
});
