import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { encodePrelude, parsePrelude } from '../../../src/wire/ssh-connector.js';

const name = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.@:+-]{0,40}$/);

void describe('SSH connector prelude (src/wire/ssh-connector.ts)', () => {
  test('what sbx ssh-proxy encodes, the connector parses back', () => {
    fc.assert(
      fc.property(name, name, (actor, instance) => {
        const line = encodePrelude({ actor, instance_id: instance, access_mode: 'ssh' });
        assert.ok(line.endsWith('\n') && line.indexOf('\n') === line.length - 1);
        assert.deepEqual(parsePrelude(line.slice(0, -1)), { actor, instance_id: instance, access_mode: 'ssh' });
      }),
    );
  });

  test('any other line is a refusal code and a message, never a throw', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json(), fc.constant('{"actor":"a b","instance_id":"i","access_mode":"ssh"}')), (line) => {
        const r = parsePrelude(line);
        if ('code' in r) assert.match(r.code, /^ssh\.(prelude_invalid|access_mode_unsupported)$/);
        else assert.equal(r.access_mode, 'ssh');
      }),
    );
  });

  test('each defect names its field', () => {
    assert.deepEqual(parsePrelude('[1]'), { code: 'ssh.prelude_invalid', message: 'the prelude is not a JSON object' });
    assert.equal(
      (parsePrelude('{"actor":"","instance_id":"i","access_mode":"ssh"}') as { message: string }).message.startsWith('actor'),
      true,
    );
    assert.equal(
      (parsePrelude('{"actor":"a","instance_id":"x y","access_mode":"ssh"}') as { message: string }).message.startsWith('instance_id'),
      true,
    );
    assert.deepEqual(parsePrelude('{"actor":"a","instance_id":"i","access_mode":"sftp"}'), {
      code: 'ssh.access_mode_unsupported',
      message: 'access_mode must be "ssh"',
    });
  });
});
