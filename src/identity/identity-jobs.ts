/**
 * Certificate issuance as a job for the job pool (actors/jobs; this file is the job module it
 * loads by URL), and the typed call ca.ts makes. Issuing a leaf generates a P-256 key and builds
 * and signs the certificate with @peculiar/x509, whose ASN.1 work is JavaScript: about 20 ms of
 * main-thread time per agent certificate (native-bench `jobs`), now spent in a pool thread.
 *
 * The job gets the CA certificate and key as PEM (a CryptoKey does not cross threads) and keeps
 * the last CA it loaded, so a thread parses the CA once, not per certificate.
 */
import type { JobRunner } from '../util/job-runner.js';
import { issueLeaf, issueLeafForCsr, loadSigner, type IssuedForKey, type IssuedPem, type LeafSpec, type Signer } from './x509.js';

/** This module, for JobPool.start({ jobModules }). */
export const IDENTITY_JOBS_MODULE = new URL(import.meta.url);

/** The CA a job signs with. */
export interface CaPem {
  readonly certPem: string;
  readonly keyPem: string;
}

let lastCa: { certPem: string; keyPem: string; signer: Promise<Signer> } | undefined;

function signerFor(ca: CaPem): Promise<Signer> {
  if (lastCa?.certPem !== ca.certPem || lastCa.keyPem !== ca.keyPem) {
    lastCa = { certPem: ca.certPem, keyPem: ca.keyPem, signer: loadSigner(ca.certPem, ca.keyPem, 'the CA handed to the job pool') };
  }
  return lastCa.signer;
}

/** The jobs, by name (loaded by the pool). */
export const jobs = {
  'identity.issueLeaf': async (args: unknown): Promise<IssuedPem> => {
    const { ca, spec } = args as { ca: CaPem; spec: LeafSpec };
    return issueLeaf(await signerFor(ca), spec);
  },
  'identity.issueLeafForCsr': async (args: unknown): Promise<IssuedForKey> => {
    const { ca, csrPem, spec } = args as { ca: CaPem; csrPem: string; spec: LeafSpec };
    return issueLeafForCsr(await signerFor(ca), csrPem, spec);
  },
};

/** issueLeaf on the job pool: a fresh key and a certificate signed by `ca` (see x509.ts). */
export async function issueLeafJob(runner: JobRunner, ca: CaPem, spec: LeafSpec): Promise<IssuedPem> {
  return (await runner.run('identity.issueLeaf', { ca, spec })) as IssuedPem;
}

/** issueLeafForCsr on the job pool: checks the CSR (bootstrap.csr_invalid) and certifies its key. */
export async function issueLeafForCsrJob(runner: JobRunner, ca: CaPem, csrPem: string, spec: LeafSpec): Promise<IssuedForKey> {
  return (await runner.run('identity.issueLeafForCsr', { ca, csrPem, spec })) as IssuedForKey;
}
