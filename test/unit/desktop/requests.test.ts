/**
 * The desktop request decoders (src/desktop/requests.ts): what they accept, what they refuse with
 * which code, and that no input makes them throw anything but a desktop problem (fast-check).
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import sshpk from 'sshpk';
import { SvcError } from '../../../src/core/errors.js';
import { parseClose, parseCreate, parseEnrollment } from '../../../src/desktop/requests.js';

const hostKey = sshpk
  .parseKey(generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }), 'pem')
  .toString('ssh')
  .replace(/ \(unnamed\)$/, '');

const codeOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof SvcError, String(e));
    return e.code;
  }
  return 'ok';
};

const enrollment = { incarnation: 'boot-7f3a', ssh_address: '10.0.0.5:22', ssh_host_key: hostKey };

describe('desktop request bodies', () => {
  test('an enrollment with and without expected_revision', () => {
    assert.deepEqual(parseEnrollment(enrollment), {
      incarnation: 'boot-7f3a',
      sshAddress: '10.0.0.5:22',
      sshHostKey: hostKey,
      expectedRevision: undefined,
    });
    assert.equal(parseEnrollment({ ...enrollment, expected_revision: 0 }).expectedRevision, 0);
    assert.equal(parseEnrollment({ ...enrollment, ssh_address: '[fd00::5]:2222' }).sshAddress, '[fd00::5]:2222');
    assert.equal(parseEnrollment({ ...enrollment, ssh_address: 'vm-a.local:22' }).sshAddress, 'vm-a.local:22');
  });

  const badEnrollments: [string, Record<string, unknown>][] = [
    ['an unknown field', { ...enrollment, note: 'x' }],
    ['no incarnation', { ssh_address: '10.0.0.5:22', ssh_host_key: hostKey }],
    ['a numeric incarnation', { ...enrollment, incarnation: 7 }],
    ['an address without a port', { ...enrollment, ssh_address: '10.0.0.5' }],
    ['port 0', { ...enrollment, ssh_address: '10.0.0.5:0' }],
    ['port 70000', { ...enrollment, ssh_address: '10.0.0.5:70000' }],
    ['a host key that is not a key', { ...enrollment, ssh_host_key: 'ssh-ed25519 AAAAAAAAAAAAAAAAAAAAAAAA' }],
    ['a host key with a comment', { ...enrollment, ssh_host_key: `${hostKey} root@vm` }],
    ['a negative expected_revision', { ...enrollment, expected_revision: -1 }],
    ['a fractional expected_revision', { ...enrollment, expected_revision: 1.5 }],
    ['a string expected_revision', { ...enrollment, expected_revision: '1' }],
  ];
  for (const [what, body] of badEnrollments) {
    test(`enrollment with ${what}: invalid_enrollment`, () =>
      assert.equal(
        codeOf(() => parseEnrollment(body)),
        'invalid_enrollment',
      ));
  }

  test('create and close', () => {
    assert.deepEqual(parseCreate({ idempotency_key: 'req-1:a' }), { idempotencyKey: 'req-1:a' });
    assert.equal(
      codeOf(() => parseCreate({ idempotency_key: '' })),
      'invalid_resource_request',
    );
    assert.equal(
      codeOf(() => parseCreate({ idempotency_key: 'k', instance_id: 'x' })),
      'invalid_resource_request',
    );
    assert.equal(
      codeOf(() => parseCreate([])),
      'invalid_resource_request',
    );
    assert.deepEqual(parseClose({ expected_generation: 3, sign_out: true }), { expectedGeneration: 3, signOut: true });
    assert.equal(
      codeOf(() => parseClose({ expected_generation: 0, sign_out: true })),
      'invalid_resource_request',
    );
    assert.equal(
      codeOf(() => parseClose({ expected_generation: 1, sign_out: 'yes' })),
      'invalid_resource_request',
    );
    assert.equal(
      codeOf(() => parseClose({ expected_generation: 1 })),
      'invalid_resource_request',
    );
    assert.equal(
      codeOf(() => parseClose({ expected_generation: 1, sign_out: false, action: 'attach' })),
      'invalid_resource_request',
    );
  });

  test('any JSON value is accepted or refused with a desktop problem code, never a crash', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        assert.ok(['ok', 'invalid_enrollment'].includes(codeOf(() => parseEnrollment(v))));
        assert.ok(['ok', 'invalid_resource_request'].includes(codeOf(() => parseCreate(v))));
        assert.ok(['ok', 'invalid_resource_request'].includes(codeOf(() => parseClose(v))));
      }),
      { numRuns: 500 },
    );
  });
});
