/**
 * sandboxd's built-in certificate authority (DESIGN.md "identity").
 *
 * On first start `ensureCa` creates, under SECRETS_DIR (directory 0700):
 *
 *   ca.pem          the CA certificate (the trust bundle)        ECDSA P-256, 10 years
 *   ca-key.pem      its private key, PKCS#8, mode 0600
 *   server.pem      sandboxd's TLS server certificate              90 days, renewed by ensureCa
 *   server-key.pem  its key, mode 0600                             when < 7 days remain
 *
 * Later starts reuse them. Agent certificates (spiffe://<td>/agent/<instance_id>, clientAuth,
 * 30 days by default) and operator certificates (spiffe://<td>/operator/<name>, clientAuth,
 * 30 days) are issued from it; see spiffe.ts for how peers are identified. There is no renewal
 * RPC yet: an agent gets a new certificate by re-provisioning or `sandboxd certs issue-agent`.
 */
import { createPrivateKey, X509Certificate as NodeX509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import { SvcError } from '../core/errors.js';
import {
  assertPrivateFile,
  ensurePrivateDir,
  exists,
  PRIVATE_FILE_MODE,
  PUBLIC_FILE_MODE,
  withLockFile,
  writeFileAtomic,
} from './secure-files.js';
import type { JobRunner } from '../util/job-runner.js';
import { issueLeafForCsrJob, issueLeafJob } from './identity-jobs.js';
import { identityFromPeerCertificate, spiffeIdOf } from './spiffe.js';
import { createCaCertificate, issueLeaf, issueLeafForCsr, loadSigner, type IssuedForKey, type SanEntry, type Signer } from './x509.js';

const DAY_SECONDS = 86_400;
/** Validity of a new CA, in seconds (10 years of 365 days). */
export const CA_TTL_SECONDS = 3650 * DAY_SECONDS;
/** Validity of the server certificate, in seconds (90 days). */
export const SERVER_CERT_TTL_SECONDS = 90 * DAY_SECONDS;
/** ensureCa renews the server certificate when less than this remains, in seconds (7 days). */
export const SERVER_RENEW_BEFORE_SECONDS = 7 * DAY_SECONDS;
/** Default validity of agent certificates, in seconds (30 days). */
export const AGENT_CERT_TTL_SECONDS = 30 * DAY_SECONDS;
/** Default validity of operator certificates, in seconds (30 days). */
export const OPERATOR_CERT_TTL_SECONDS = 30 * DAY_SECONDS;
/** Hosts always in the server certificate. */
export const DEFAULT_SERVER_HOSTS: readonly string[] = ['localhost', '127.0.0.1', '::1'];

/** Where ensureCa keeps the CA and server material. */
export interface CaFiles {
  readonly dir: string;
  readonly caCert: string;
  readonly caKey: string;
  readonly serverCert: string;
  readonly serverKey: string;
}

/** A loaded CA. Its signing key stays inside this module (never on the object). */
export interface CaMaterial {
  readonly trustDomain: string;
  /** The CA certificate, PEM: what servers and clients trust. */
  readonly caCertPem: string;
  readonly caNotAfter: Date;
  /** sandboxd's server certificate and key (PKCS#8), PEM. */
  readonly serverCertPem: string;
  readonly serverKeyPem: string;
  readonly serverNotAfter: Date;
  /** File locations; null for an in-memory CA (createStandaloneCa). */
  readonly files: CaFiles | null;
  /** What this call created (false: reused from disk). */
  readonly created: { readonly ca: boolean; readonly server: boolean };
}

/** A certificate issued to a client. */
export interface IssuedCert {
  certPem: string;
  /** PKCS#8 PEM. Write it mode 0600; never log it. */
  keyPem: string;
  spiffeId: string;
  notBefore: Date;
  notAfter: Date;
  serialNumber: string;
}

const signers = new WeakMap<CaMaterial, Signer>();
/** CAs whose client certificates are issued on the job pool: the runner and the CA key as PEM. */
const offThread = new WeakMap<CaMaterial, { jobs: JobRunner; keyPem: string }>();

function signerOf(ca: CaMaterial): Signer {
  const s = signers.get(ca);
  if (s === undefined) throw new SvcError('server.internal', 'not a CA from ensureCa or createStandaloneCa');
  return s;
}

const TRUST_DOMAIN = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/;
const DNS_NAME = /^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

function checkTrustDomain(trustDomain: string): void {
  if (!TRUST_DOMAIN.test(trustDomain)) throw new SvcError('request.invalid', `"${trustDomain}" is not a valid SPIFFE trust domain`);
}

function ttlMs(ttlSeconds: number | undefined, fallback: number): number {
  const ttl = ttlSeconds ?? fallback;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > CA_TTL_SECONDS) {
    throw new SvcError('request.invalid', `ttlSeconds must be an integer from 1 to ${CA_TTL_SECONDS}, got ${String(ttlSeconds)}`);
  }
  return ttl * 1000;
}

/** localhost, 127.0.0.1, ::1 and `extra`, deduplicated, as SAN entries (IPs as ip, names as dns). */
function serverSans(extra: readonly string[], trustDomain: string): { sans: SanEntry[]; hosts: string[] } {
  const hosts = [...new Set([...DEFAULT_SERVER_HOSTS, ...extra])];
  const sans: SanEntry[] = hosts.map((h) => {
    if (isIP(h) !== 0) return { type: 'ip', value: h };
    if (!DNS_NAME.test(h)) throw new SvcError('request.invalid', `server host "${h}" is neither an IP address nor a DNS name`);
    return { type: 'dns', value: h };
  });
  sans.push({ type: 'url', value: spiffeIdOf(trustDomain, { kind: 'server' }) });
  return { sans, hosts };
}

async function issueServer(signer: Signer, sans: SanEntry[], now: Date) {
  return issueLeaf(signer, { commonName: 'sandboxd server', sans, usage: 'serverAuth', now, ttlMs: SERVER_CERT_TTL_SECONDS * 1000 });
}

/** The stored server certificate when it is still good for `hosts` at `now`, else null. */
async function reusableServer(files: CaFiles, signer: Signer, trustDomain: string, hosts: string[], now: Date) {
  if (!(await exists(files.serverCert)) || !(await exists(files.serverKey))) return null;
  await assertPrivateFile(files.serverKey);
  const [certPem, keyPem] = await Promise.all([readFile(files.serverCert, 'utf8'), readFile(files.serverKey, 'utf8')]);
  try {
    const cert = new NodeX509Certificate(certPem);
    const ca = new NodeX509Certificate(signer.certPem);
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey) || !cert.checkPrivateKey(createPrivateKey(keyPem))) return null;
    const notAfter = new Date(cert.validTo);
    if (new Date(cert.validFrom) > now || notAfter.getTime() - now.getTime() <= SERVER_RENEW_BEFORE_SECONDS * 1000) return null;
    if (!hosts.every((h) => (isIP(h) !== 0 ? cert.checkIP(h) : cert.checkHost(h)) !== undefined)) return null;
    if (identityFromPeerCertificate({ raw: cert.raw }, trustDomain)?.kind !== 'server') return null;
    return { certPem, keyPem, notAfter };
  } catch {
    return null; // unreadable or foreign: issue a new one
  }
}

/**
 * Loads the CA and server certificate from `secretsDir`, creating what is missing (see the
 * file comment). Safe to call from several processes at once (a lock file serialises them).
 * Rejects when the CA key is accessible by group or others, when only one of ca.pem and
 * ca-key.pem exists, when the CA has expired, or when the files are not a P-256 CA and its key.
 *
 * @param opts.serverHosts extra DNS names / IPs for the server certificate (default none)
 * @param opts.now the current time (tests: create already-old material)
 * @param opts.jobs issue agent and operator certificates on this job pool (default: inline)
 */
export async function ensureCa(opts: {
  secretsDir: string;
  trustDomain: string;
  serverHosts?: readonly string[];
  now?: Date;
  jobs?: JobRunner;
}): Promise<CaMaterial> {
  checkTrustDomain(opts.trustDomain);
  const now = opts.now ?? new Date();
  const { sans, hosts } = serverSans(opts.serverHosts ?? [], opts.trustDomain);
  const dir = resolve(opts.secretsDir);
  const files: CaFiles = {
    dir,
    caCert: join(dir, 'ca.pem'),
    caKey: join(dir, 'ca-key.pem'),
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server-key.pem'),
  };
  await ensurePrivateDir(dir);
  return withLockFile(join(dir, '.ca.lock'), async () => {
    const [hasCert, hasKey] = await Promise.all([exists(files.caCert), exists(files.caKey)]);
    let signer: Signer;
    let caKeyPem: string;
    if (hasCert !== hasKey) {
      const [have, missing] = hasCert ? ['ca.pem', 'ca-key.pem'] : ['ca-key.pem', 'ca.pem'];
      throw new SvcError(
        'server.internal',
        `${dir} holds ${have} but not ${missing}: restore ${missing}, or move ${have} away to create a new CA (every agent certificate must then be reissued)`,
      );
    }
    if (hasCert) {
      await assertPrivateFile(files.caKey);
      const [certPem, keyPem] = await Promise.all([readFile(files.caCert, 'utf8'), readFile(files.caKey, 'utf8')]);
      signer = await loadSigner(certPem, keyPem, dir);
      caKeyPem = keyPem;
      if (signer.cert.notAfter.getTime() <= now.getTime()) {
        throw new SvcError(
          'server.internal',
          `the CA in ${dir} expired on ${signer.cert.notAfter.toISOString()}: move ca.pem and ca-key.pem away to create a new one (every agent certificate must then be reissued)`,
        );
      }
    } else {
      const fresh = await createCaCertificate({ trustDomain: opts.trustDomain, now, ttlMs: CA_TTL_SECONDS * 1000 });
      await writeFileAtomic(files.caKey, fresh.keyPem, PRIVATE_FILE_MODE);
      await writeFileAtomic(files.caCert, fresh.signer.certPem, PUBLIC_FILE_MODE);
      signer = fresh.signer;
      caKeyPem = fresh.keyPem;
    }
    let server = await reusableServer(files, signer, opts.trustDomain, hosts, now);
    const serverCreated = server === null;
    if (server === null) {
      const issued = await issueServer(signer, sans, now);
      await writeFileAtomic(files.serverKey, issued.keyPem, PRIVATE_FILE_MODE);
      await writeFileAtomic(files.serverCert, issued.certPem, PUBLIC_FILE_MODE);
      server = issued;
    }
    const material: CaMaterial = {
      trustDomain: opts.trustDomain,
      caCertPem: signer.certPem,
      caNotAfter: signer.cert.notAfter,
      serverCertPem: server.certPem,
      serverKeyPem: server.keyPem,
      serverNotAfter: server.notAfter,
      files,
      created: { ca: !hasCert, server: serverCreated },
    };
    signers.set(material, signer);
    if (opts.jobs !== undefined) offThread.set(material, { jobs: opts.jobs, keyPem: caKeyPem });
    return material;
  });
}

/**
 * A CA that lives only in memory, with its own server certificate: for tests (a "foreign" CA
 * whose certificates sandboxd must refuse) and tools.
 */
export async function createStandaloneCa(
  trustDomain: string,
  opts: { now?: Date; serverHosts?: readonly string[] } = {},
): Promise<CaMaterial> {
  checkTrustDomain(trustDomain);
  const now = opts.now ?? new Date();
  const { sans } = serverSans(opts.serverHosts ?? [], trustDomain);
  const { signer } = await createCaCertificate({ trustDomain, now, ttlMs: CA_TTL_SECONDS * 1000 });
  const server = await issueServer(signer, sans, now);
  const material: CaMaterial = {
    trustDomain,
    caCertPem: signer.certPem,
    caNotAfter: signer.cert.notAfter,
    serverCertPem: server.certPem,
    serverKeyPem: server.keyPem,
    serverNotAfter: server.notAfter,
    files: null,
    created: { ca: true, server: true },
  };
  signers.set(material, signer);
  return material;
}

/**
 * Issues an agent client certificate: URI SAN spiffe://<td>/agent/<instanceId>, EKU clientAuth,
 * CN agent-<instanceId>. instanceId: 1–128 of [A-Za-z0-9._-] (request.invalid otherwise).
 *
 * @param opts.ttlSeconds validity in seconds, default AGENT_CERT_TTL_SECONDS (30 days), clamped
 *   to the CA's expiry
 * @param opts.now issue as of this time (a past `now` with a short TTL gives an expired cert)
 */
export async function issueAgentCert(ca: CaMaterial, opts: { instanceId: string; ttlSeconds?: number; now?: Date }): Promise<IssuedCert> {
  return issueClient(
    ca,
    { kind: 'agent', instanceId: opts.instanceId },
    `agent-${opts.instanceId}`,
    ttlMs(opts.ttlSeconds, AGENT_CERT_TTL_SECONDS),
    opts.now,
  );
}

/**
 * Issues an operator client certificate: URI SAN spiffe://<td>/operator/<name>, EKU clientAuth,
 * CN operator-<name>. Same name rules and options as issueAgentCert (default TTL 30 days).
 */
export async function issueOperatorCert(ca: CaMaterial, opts: { name: string; ttlSeconds?: number; now?: Date }): Promise<IssuedCert> {
  return issueClient(
    ca,
    { kind: 'operator', name: opts.name },
    `operator-${opts.name}`,
    ttlMs(opts.ttlSeconds, OPERATOR_CERT_TTL_SECONDS),
    opts.now,
  );
}

/** An agent certificate issued for a CSR's key: no private key (it never left the agent). */
export type IssuedForCsr = IssuedForKey & { spiffeId: string };

/**
 * Issues an agent certificate for the public key of `csrPem` (PKCS#10, ECDSA P-256, its
 * signature checked: bootstrap.csr_invalid otherwise). The identity is `instanceId`'s
 * (spiffe://<td>/agent/<instanceId>, clientAuth, CN agent-<instanceId>) whatever the CSR's
 * subject asks for. Same TTL rules as issueAgentCert; on the job pool when the CA has one.
 */
export async function issueAgentCertForCsr(
  ca: CaMaterial,
  opts: { instanceId: string; csrPem: string; ttlSeconds?: number; now?: Date },
): Promise<IssuedForCsr> {
  let spiffeId: string;
  try {
    spiffeId = spiffeIdOf(ca.trustDomain, { kind: 'agent', instanceId: opts.instanceId });
  } catch (err) {
    throw new SvcError('request.invalid', (err as Error).message);
  }
  const signer = signerOf(ca);
  const spec = {
    commonName: `agent-${opts.instanceId}`,
    sans: [{ type: 'url' as const, value: spiffeId }],
    usage: 'clientAuth' as const,
    now: opts.now ?? new Date(),
    ttlMs: ttlMs(opts.ttlSeconds, AGENT_CERT_TTL_SECONDS),
  };
  const pool = offThread.get(ca);
  const issued =
    pool === undefined
      ? await issueLeafForCsr(signer, opts.csrPem, spec)
      : await issueLeafForCsrJob(pool.jobs, { certPem: signer.certPem, keyPem: pool.keyPem }, opts.csrPem, spec);
  return { ...issued, spiffeId };
}

async function issueClient(
  ca: CaMaterial,
  identity: { kind: 'agent'; instanceId: string } | { kind: 'operator'; name: string },
  commonName: string,
  validityMs: number,
  now: Date | undefined,
): Promise<IssuedCert> {
  let spiffeId: string;
  try {
    spiffeId = spiffeIdOf(ca.trustDomain, identity);
  } catch (err) {
    throw new SvcError('request.invalid', (err as Error).message);
  }
  const signer = signerOf(ca);
  const spec = {
    commonName,
    sans: [{ type: 'url' as const, value: spiffeId }],
    usage: 'clientAuth' as const,
    now: now ?? new Date(),
    ttlMs: validityMs,
  };
  const pool = offThread.get(ca);
  const issued =
    pool === undefined
      ? await issueLeaf(signer, spec)
      : await issueLeafJob(pool.jobs, { certPem: signer.certPem, keyPem: pool.keyPem }, spec);
  return { ...issued, spiffeId };
}

/** Files written by writeAgentBundle / writeOperatorBundle. */
export interface BundleFiles {
  /** DIR/ca.pem: the CA to verify the server with. */
  readonly ca: string;
  /** DIR/agent.pem or DIR/operator.pem. */
  readonly cert: string;
  /** DIR/agent-key.pem or DIR/operator-key.pem, mode 0600. */
  readonly key: string;
  readonly spiffeId: string;
  readonly notAfter: Date;
}

async function writeBundle(dir: string, ca: CaMaterial, role: 'agent' | 'operator', issued: IssuedCert): Promise<BundleFiles> {
  const out = resolve(dir);
  await ensurePrivateDir(out);
  const files = { ca: join(out, 'ca.pem'), cert: join(out, `${role}.pem`), key: join(out, `${role}-key.pem`) };
  await writeFileAtomic(files.key, issued.keyPem, PRIVATE_FILE_MODE);
  await writeFileAtomic(files.cert, issued.certPem, PUBLIC_FILE_MODE);
  await writeFileAtomic(files.ca, ca.caCertPem, PUBLIC_FILE_MODE);
  return { ...files, spiffeId: issued.spiffeId, notAfter: issued.notAfter };
}

/**
 * Issues an agent certificate and writes DIR/ca.pem, DIR/agent.pem, DIR/agent-key.pem (0600;
 * DIR created 0700). Existing files are replaced atomically.
 */
export async function writeAgentBundle(
  dir: string,
  ca: CaMaterial,
  opts: { instanceId: string; ttlSeconds?: number; now?: Date },
): Promise<BundleFiles> {
  return writeBundle(dir, ca, 'agent', await issueAgentCert(ca, opts));
}

/** Issues an operator certificate and writes DIR/ca.pem, DIR/operator.pem, DIR/operator-key.pem (0600). */
export async function writeOperatorBundle(
  dir: string,
  ca: CaMaterial,
  opts: { name: string; ttlSeconds?: number; now?: Date },
): Promise<BundleFiles> {
  return writeBundle(dir, ca, 'operator', await issueOperatorCert(ca, opts));
}
