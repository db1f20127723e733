/**
 * Lease public keys against real ssh-keygen: every accepted type's fingerprint is exactly what
 * `ssh-keygen -lf` prints, and what is refused gets its own code without the input being echoed.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { SvcError } from '../../../../src/core/errors.js';
import { parsePublicKey } from '../../../../src/gateway/ssh/public-key.js';
import { sshKeygen, type TestSshKey } from '../../../support/ssh-keys.js';

const dir = mkdtempSync(join(tmpdir(), 'sbx-sshkey-'));
let n = 0;

/** A fresh key pair made by ssh-keygen: the .pub line and the private key text. */
function keygen(type: string, bits?: number): TestSshKey {
  return sshKeygen(join(dir, `k${n++}`), { type, ...(bits === undefined ? {} : { bits }), comment: 'me@laptop' });
}

/** The digest ssh-keygen -lf prints (`SHA256:<base64>`), in the spec's form `sha256:<hex>`. */
function keygenFingerprint(pubPath: string): string {
  const out = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', pubPath], { encoding: 'utf8' });
  const printed = out.split(' ')[1] ?? '';
  assert.match(printed, /^SHA256:[A-Za-z0-9+/]{43}$/);
  return `sha256:${Buffer.from(printed.slice('SHA256:'.length), 'base64').toString('hex')}`;
}

function refusal(value: unknown): SvcError {
  try {
    parsePublicKey(value);
  } catch (err) {
    assert.ok(err instanceof SvcError, String(err));
    return err;
  }
  assert.fail('accepted');
}

void describe('SSH lease public keys', () => {
  after(() => rmSync(dir, { recursive: true, force: true }));

  void test("ed25519, ecdsa 256/384/521 and rsa 2048/3072: the fingerprint is ssh-keygen -lf's, the comment dropped", () => {
    const kinds: [string, number | undefined, number][] = [
      ['ed25519', undefined, 256],
      ['ecdsa', 256, 256],
      ['ecdsa', 384, 384],
      ['ecdsa', 521, 521],
      ['rsa', 2048, 2048],
      ['rsa', 3072, 3072],
    ];
    for (const [type, bits, expectBits] of kinds) {
      const k = keygen(type, bits);
      const parsed = parsePublicKey(k.pub);
      assert.equal(parsed.sha256, keygenFingerprint(`${k.path}.pub`), `${type} ${bits ?? ''}`);
      assert.match(parsed.sha256, /^sha256:[0-9a-f]{64}$/);
      assert.equal(parsed.bits, expectBits);
      assert.ok(!parsed.line.includes('me@laptop'));
      assert.equal(parsed.line, k.pub.trim().split(' ').slice(0, 2).join(' '));
    }
  });

  void test('a private key is refused with its own code, and the message quotes none of it', () => {
    for (const type of ['ed25519', 'rsa']) {
      const k = keygen(type);
      const err = refusal(k.priv);
      assert.equal(err.code, 'ssh_lease.private_key_refused');
      assert.equal(err.httpStatus, 400);
      const body = k.priv.split('\n')[1] ?? '';
      assert.ok(!err.message.includes(body.slice(0, 20)) && !JSON.stringify(err.details ?? {}).includes(body.slice(0, 20)));
    }
    const pem = execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519'], { encoding: 'utf8' });
    assert.equal(refusal(pem).code, 'ssh_lease.private_key_refused');
  });

  void test('rsa 1024 and ssh-dss are unsupported; certificates, junk and mismatched bodies are invalid', () => {
    const small = keygen('rsa', 1024);
    const err = refusal(small.pub);
    assert.equal(err.code, 'ssh_lease.public_key_unsupported');
    assert.match(err.message, /1024 bits/);
    assert.equal(refusal('ssh-dss AAAAB3NzaC1kc3MAAACBAP== x').code, 'ssh_lease.public_key_unsupported');

    const ca = keygen('ed25519');
    const user = keygen('ed25519');
    execFileSync('ssh-keygen', ['-q', '-s', ca.path, '-I', 'x', '-n', 'agent', `${user.path}.pub`]);
    const cert = readFileSync(`${user.path}-cert.pub`, 'utf8');
    assert.equal(refusal(cert).code, 'ssh_lease.public_key_invalid');

    const ed = keygen('ed25519').pub.split(' ');
    const rsa = keygen('rsa', 2048).pub.split(' ');
    const invalid = [
      '',
      'hello',
      `${ed[0]} ${ed[1]}\n${ed[0]} ${ed[1]}`,
      `ssh-rsa ${ed[1]}`, // body says ssh-ed25519
      `ssh-ed25519 ${Buffer.from(Buffer.from(ed[1] ?? '', 'base64').subarray(0, 30)).toString('base64')}`, // truncated
      `ssh-ed25519 ${Buffer.concat([Buffer.from(ed[1] ?? '', 'base64'), Buffer.from([0])]).toString('base64')}`, // trailing byte
      `ssh-rsa ${(rsa[1] ?? '').slice(0, 40)}`,
      42,
      null,
      'x'.repeat(20_000),
    ];
    for (const v of invalid) assert.equal(refusal(v).code, 'ssh_lease.public_key_invalid', String(v).slice(0, 40));
  });

  void test('an ecdsa point off the curve is invalid', () => {
    const k = keygen('ecdsa', 256);
    const blob = Buffer.from(k.pub.split(' ')[1] ?? '', 'base64');
    blob[blob.length - 1] = (blob[blob.length - 1] as number) ^ 0x01;
    const err = refusal(`ecdsa-sha2-nistp256 ${blob.toString('base64')}`);
    assert.equal(err.code, 'ssh_lease.public_key_invalid');
    assert.match(err.message, /not on the curve/);
  });
});
