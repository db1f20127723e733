import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { SvcError } from '../../../src/core/errors.js';
import { CREDENTIALS_KEY_FILE, SecretBox } from '../../../src/credentials/secret-box.js';

void describe('SecretBox (credential values at rest)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-box-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  void test('creates a 0600 key once; the same key opens what an earlier instance sealed', async () => {
    const a = await SecretBox.open(join(dir, 'secrets'));
    const sealed = a.seal('model-api', 'sk-very-secret-value');
    assert.equal(statSync(join(dir, 'secrets', CREDENTIALS_KEY_FILE)).mode & 0o777, 0o600);
    assert.equal(statSync(join(dir, 'secrets')).mode & 0o777, 0o700);
    const b = await SecretBox.open(join(dir, 'secrets'));
    assert.equal(b.open('model-api', sealed), 'sk-very-secret-value');
    assert.equal(sealed.box.indexOf('sk-very-secret-value'), -1);
  });

  void test('a random nonce per value; another name, a flipped bit or another key do not open it', async () => {
    const box = await SecretBox.open(join(dir, 'secrets'));
    const s1 = box.seal('n', 'same-value-1234');
    const s2 = box.seal('n', 'same-value-1234');
    assert.notDeepEqual(s1.nonce, s2.nonce);
    assert.notDeepEqual(s1.box, s2.box);
    assert.throws(() => box.open('other', s1), SvcError);
    const flipped = Buffer.from(s1.box);
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    assert.throws(() => box.open('n', { nonce: s1.nonce, box: flipped }), SvcError);
    const other = await SecretBox.open(join(dir, 'other-secrets'));
    assert.throws(() => other.open('n', s1), SvcError);
  });

  void test('a key file readable by others is refused', async () => {
    const d = join(dir, 'loose');
    await SecretBox.open(d);
    chmodSync(join(d, CREDENTIALS_KEY_FILE), 0o644);
    await assert.rejects(SecretBox.open(d), /must not be accessible by group or others/);
    writeFileSync(join(d, CREDENTIALS_KEY_FILE), 'short\n', { mode: 0o600 });
    chmodSync(join(d, CREDENTIALS_KEY_FILE), 0o600);
    await assert.rejects(SecretBox.open(d), /32-byte base64 key/);
  });
});
