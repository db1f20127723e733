/**
 * The agent's hand-built PKCS#10 CSR: openssl and sandboxd's own CSR check (the one consume runs)
 * both accept it, for short and long subjects (one- and two-byte DER lengths), and a key other
 * than P-256 is refused before anything is signed.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { buildCsrPem } from '../../../src/guest-agent/csr.js';
import { verifyCsr } from '../../../src/identity/x509.js';
import { openssl, tempDir } from '../identity/helpers.js';

test('the CSR verifies with openssl and with verifyCsr, for short and long subjects', async (t) => {
  const dir = await tempDir(t);
  for (const cn of ['agent-a', `agent-${'x'.repeat(200)}`]) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = buildCsrPem(privateKey, cn);
    const file = join(dir, 'req.csr');
    await writeFile(file, pem);
    const r = await openssl(['req', '-in', file, '-noout', '-verify', '-subject']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /verify OK/);
    assert.ok(r.out.includes(cn), r.out);
    await verifyCsr(pem);
  }
});

test('only ECDSA P-256 keys make a CSR', () => {
  assert.throws(() => buildCsrPem(generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey, 'x'), /P-256/);
  assert.throws(() => buildCsrPem(generateKeyPairSync('ed25519').privateKey, 'x'), /P-256/);
});
