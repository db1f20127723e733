/**
 * Agent and operator certificates issued on the job pool are the certificates inline issuance
 * gives: same subject, SAN, validity, usages and issuer, signed by the CA, with a key that fits.
 */
import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { test } from 'node:test';
import { JobPool } from '../../../actors/jobs/job-pool.js';
import { ensureCa, issueAgentCert, issueOperatorCert, type IssuedCert } from '../../../src/identity/ca.js';
import { IDENTITY_JOBS_MODULE } from '../../../src/identity/identity-jobs.js';
import { tempDir } from './helpers.js';

function described(issued: IssuedCert, caPem: string): Record<string, unknown> {
  const cert = new X509Certificate(issued.certPem);
  const ca = new X509Certificate(caPem);
  assert.ok(cert.checkIssued(ca) && cert.verify(ca.publicKey), 'signed by the CA');
  assert.ok(cert.checkPrivateKey(createPrivateKey(issued.keyPem)), 'the key fits the certificate');
  return {
    subject: cert.subject,
    issuer: cert.issuer,
    san: cert.subjectAltName,
    validFrom: cert.validFrom,
    validTo: cert.validTo,
    usages: cert.keyUsage,
    ca: cert.ca,
    spiffeId: issued.spiffeId,
    notBefore: issued.notBefore.getTime(),
    notAfter: issued.notAfter.getTime(),
  };
}

void test('identity.issueLeaf: certificates from the pool match inline ones of the same CA', async (t) => {
  const dir = await tempDir(t);
  const pool = await JobPool.start({ mode: 'workers', threads: 1, jobModules: [IDENTITY_JOBS_MODULE] });
  t.after(() => pool.stop());
  const inlineCa = await ensureCa({ secretsDir: dir, trustDomain: 'sandbox.local' });
  const pooledCa = await ensureCa({ secretsDir: dir, trustDomain: 'sandbox.local', jobs: pool });
  assert.equal(pooledCa.caCertPem, inlineCa.caCertPem);
  const now = new Date(Date.UTC(2026, 10, 26, 12));
  for (const issue of [
    (ca: typeof inlineCa) => issueAgentCert(ca, { instanceId: 'i-0123', now }),
    (ca: typeof inlineCa) => issueOperatorCert(ca, { name: 'alice', ttlSeconds: 3600, now }),
  ]) {
    const [inline, pooled] = await Promise.all([issue(inlineCa), issue(pooledCa)]);
    assert.notEqual(pooled.serialNumber, inline.serialNumber);
    assert.deepEqual(described(pooled, pooledCa.caCertPem), described(inline, inlineCa.caCertPem));
  }
  // a bad name is refused before any job runs, as inline
  await assert.rejects(issueAgentCert(pooledCa, { instanceId: 'bad/id' }), (e: Error & { code?: string }) => e.code === 'request.invalid');
});
