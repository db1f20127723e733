/**
 * Secure bootstrap enrollment, the agent's side (README "Secure bootstrap"): with
 * `--bootstrap-token-file FILE` the agent
 *
 *   1. reads the staged material (readBootstrapMaterial),
 *   2. makes its own ECDSA P-256 key and a CSR over it (the key never leaves the agent),
 *   3. POSTs {token, csr} to the material's consume URL (https verified with the material's CA),
 *   4. writes agent-key.pem (0600), agent.pem and ca.pem into --certs (0700), the layout
 *      `--certs` always reads, checks the certificate is for its key and instance, and
 *      enrollment.json (agent and instance id: a restart without the material finds them there),
 *   5. deletes the material file (the token is spent),
 *
 * then connects over mTLS as usual. Network failures and 503s are retried with backoff until the
 * token expires; any other refusal is an EnrollmentError carrying the server's taxonomy code,
 * which the binary logs and exits 2 on (bad configuration: a supervisor must not restart it into
 * the same refusal). The token is never logged, never in an error message.
 */
import { createPrivateKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { BOOTSTRAP_MATERIAL_SCHEMA, type BootstrapConsumeResponse, type BootstrapMaterial } from '../wire/bootstrap.js';
import { buildCsrPem } from './csr.js';

/** An enrollment that cannot succeed by retrying: `code` is the server's taxonomy code or ours (`bootstrap.material_invalid`, …). */
export class EnrollmentError extends Error {
  override readonly name = 'EnrollmentError';
  constructor(
    readonly code: string,
    message: string,
    readonly httpStatus: number | null = null,
  ) {
    super(message);
  }
}

const ID_RE = /^[A-Za-z0-9._-]{1,128}$/;
const TOKEN_RE = /^[A-Za-z0-9_-]{16,256}$/;
/** Longest wait for one consume call, ms. */
const REQUEST_TIMEOUT_MS = 30_000;
/** TLS verification failures (OpenSSL / Node codes): not retried. */
const TLS_TRUST_ERRORS = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);
/** Largest consume answer read, bytes. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** Reads and checks the material file; EnrollmentError `bootstrap.material_invalid` when it is not usable. */
export async function readBootstrapMaterial(file: string): Promise<BootstrapMaterial> {
  const invalid = (why: string): EnrollmentError => new EnrollmentError('bootstrap.material_invalid', `bootstrap material ${file}: ${why}`);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw invalid(`cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let m: Partial<Record<keyof BootstrapMaterial, unknown>>;
  try {
    m = JSON.parse(text) as typeof m;
  } catch {
    throw invalid('is not JSON');
  }
  if (typeof m !== 'object' || m === null) throw invalid('is not a JSON object');
  if (m.schema_version !== BOOTSTRAP_MATERIAL_SCHEMA) throw invalid(`schema_version must be ${BOOTSTRAP_MATERIAL_SCHEMA}`);
  if (typeof m.token !== 'string' || !TOKEN_RE.test(m.token)) throw invalid('token is missing or malformed');
  for (const k of ['instance_id', 'agent_id'] as const) {
    const v = m[k];
    if (typeof v !== 'string' || !ID_RE.test(v)) throw invalid(`${k} must be 1-128 of [A-Za-z0-9._-]`);
  }
  if (typeof m.consume_url !== 'string' || !/^https?:\/\//.test(m.consume_url)) throw invalid('consume_url must be an http(s) URL');
  try {
    new URL(m.consume_url);
  } catch {
    throw invalid('consume_url is not a URL');
  }
  if (typeof m.ca_pem !== 'string' || !m.ca_pem.includes('-----BEGIN CERTIFICATE-----')) throw invalid('ca_pem must be a PEM certificate');
  if (typeof m.expires_at !== 'string' || Number.isNaN(Date.parse(m.expires_at))) throw invalid('expires_at must be an RFC 3339 time');
  if (typeof m.token_id !== 'string' || typeof m.trust_domain !== 'string') throw invalid('token_id and trust_domain are required');
  return m as BootstrapMaterial;
}

/** What enrollment leaves beside the bundle (certsDir/enrollment.json, not secret). */
export interface EnrollmentRecord {
  readonly agent_id: string;
  readonly instance_id: string;
  readonly spiffe_id: string;
  readonly expires_at: string;
}

export const ENROLLMENT_RECORD_FILE = 'enrollment.json';

/**
 * The enrollment record of `certsDir` when it also holds a whole agent bundle (a restart after a
 * successful enrollment), else null.
 */
export async function enrolledBundle(certsDir: string): Promise<EnrollmentRecord | null> {
  try {
    await Promise.all(['ca.pem', 'agent.pem', 'agent-key.pem'].map((f) => readFile(join(certsDir, f))));
    const r = JSON.parse(await readFile(join(certsDir, ENROLLMENT_RECORD_FILE), 'utf8')) as Partial<EnrollmentRecord>;
    if (typeof r.agent_id !== 'string' || !ID_RE.test(r.agent_id) || typeof r.instance_id !== 'string' || !ID_RE.test(r.instance_id))
      return null;
    return r as EnrollmentRecord;
  } catch {
    return null;
  }
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

function post(url: URL, caPem: string, body: string, signal: AbortSignal): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const opts = {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), accept: 'application/json' },
      signal,
      timeout: REQUEST_TIMEOUT_MS,
    };
    const onResponse = (res: IncomingMessage): void => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_RESPONSE_BYTES) res.destroy(new Error('the consume answer is too large'));
        else chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    };
    const req = url.protocol === 'https:' ? httpsRequest(url, { ...opts, ca: caPem }, onResponse) : httpRequest(url, opts, onResponse);
    req.on('timeout', () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** The error code and message of a v1 error envelope, if the body is one. */
function envelopeOf(body: string): { code: string; message: string } | null {
  try {
    const e = (JSON.parse(body) as { error?: { code?: unknown; message?: unknown } }).error;
    if (typeof e?.code === 'string') return { code: e.code, message: typeof e.message === 'string' ? e.message : '' };
  } catch {
    // not JSON
  }
  return null;
}

function checkAnswer(json: unknown, material: BootstrapMaterial, keyPem: string): BootstrapConsumeResponse {
  const r = json as Partial<BootstrapConsumeResponse> | null;
  const bad = (why: string): EnrollmentError => new EnrollmentError('bootstrap.response_invalid', `the consume answer ${why}`);
  if (typeof r?.certificate_pem !== 'string' || typeof r.ca_pem !== 'string' || typeof r.spiffe_id !== 'string') throw bad('lacks fields');
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(r.certificate_pem);
  } catch {
    throw bad('holds no PEM certificate');
  }
  if (!cert.checkPrivateKey(createPrivateKey(keyPem))) throw bad("is a certificate for another key than the agent's");
  if (!cert.verify(new X509Certificate(material.ca_pem).publicKey)) throw bad('is a certificate the material CA did not sign');
  if (!(cert.subjectAltName ?? '').includes(`/agent/${material.instance_id}`)) throw bad('names another instance');
  return r as BootstrapConsumeResponse;
}

export async function writeAtomic(path: string, data: string, mode: number): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  const fh = await open(tmp, 'w', mode);
  try {
    await fh.writeFile(data);
    await fh.chmod(mode);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
}

export interface EnrollOptions {
  readonly materialFile: string;
  readonly certsDir: string;
  readonly log: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** Stops the retries (the agent got SIGTERM). */
  readonly signal?: AbortSignal;
  /** First retry delay, ms (doubles to 5 s). Default 250. */
  readonly retryBaseMs?: number;
}

/**
 * Enrolls once (see the file comment). Resolves with the SPIFFE id once the bundle is in
 * certsDir and the material file is deleted; rejects with EnrollmentError.
 */
export async function enrollWithToken(o: EnrollOptions): Promise<{ spiffeId: string; expiresAt: string }> {
  const material = await readBootstrapMaterial(o.materialFile);
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const keyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  const csr = buildCsrPem(privateKey, `agent-${material.instance_id}`);
  const url = new URL(material.consume_url);
  const body = JSON.stringify({ token: material.token, csr });
  const expiresAtMs = Date.parse(material.expires_at);
  const signal = o.signal ?? new AbortController().signal;
  let delayMs = o.retryBaseMs ?? 250;
  o.log.info({ tokenId: material.token_id, consumeUrl: url.origin + url.pathname }, 'enrolling with a bootstrap token');
  for (let attempt = 1; ; attempt++) {
    let answer: Answer | null = null;
    let failure: string;
    try {
      answer = await post(url, material.ca_pem, body, signal);
      failure = `HTTP ${answer.status}`;
    } catch (err) {
      if (signal.aborted) throw new EnrollmentError('bootstrap.aborted', 'enrollment stopped');
      const code = (err as NodeJS.ErrnoException).code ?? '';
      // A server the material's CA does not vouch for stays untrusted however often we ask.
      if (TLS_TRUST_ERRORS.has(code))
        throw new EnrollmentError('bootstrap.server_untrusted', `the consume server is not trusted by the material's CA (${code})`);
      failure = (err as Error).message;
    }
    if (answer !== null && answer.status === 200) {
      let json: unknown;
      try {
        json = JSON.parse(answer.body);
      } catch {
        throw new EnrollmentError('bootstrap.response_invalid', 'the consume answer is not JSON');
      }
      const res = checkAnswer(json, material, keyPem);
      await mkdir(o.certsDir, { recursive: true, mode: 0o700 });
      await chmod(o.certsDir, 0o700);
      await writeAtomic(join(o.certsDir, 'agent-key.pem'), keyPem, 0o600);
      await writeAtomic(join(o.certsDir, 'agent.pem'), res.certificate_pem, 0o644);
      await writeAtomic(join(o.certsDir, 'ca.pem'), res.ca_pem, 0o644);
      const record: EnrollmentRecord = {
        agent_id: material.agent_id,
        instance_id: material.instance_id,
        spiffe_id: res.spiffe_id,
        expires_at: res.expires_at,
      };
      await writeAtomic(join(o.certsDir, ENROLLMENT_RECORD_FILE), `${JSON.stringify(record)}\n`, 0o644);
      await rm(o.materialFile, { force: true });
      o.log.info({ tokenId: material.token_id, spiffeId: res.spiffe_id, expiresAt: res.expires_at }, 'enrolled: certificate written');
      return { spiffeId: res.spiffe_id, expiresAt: res.expires_at };
    }
    const env = answer === null ? null : envelopeOf(answer.body);
    const retryable = answer === null || answer.status === 503 || answer.status === 502 || answer.status === 504;
    if (!retryable) {
      throw new EnrollmentError(
        env?.code ?? 'bootstrap.refused',
        env?.message ?? `the consume call was refused (${failure})`,
        answer?.status ?? null,
      );
    }
    if (Date.now() + delayMs >= expiresAtMs) {
      throw new EnrollmentError(env?.code ?? 'bootstrap.unreachable', `gave up before the token expires: ${env?.message ?? failure}`);
    }
    o.log.warn({ attempt, code: env?.code, failure, retryInMs: delayMs }, 'bootstrap consume failed; retrying');
    await new Promise((r) => setTimeout(r, delayMs));
    if (signal.aborted) throw new EnrollmentError('bootstrap.aborted', 'enrollment stopped');
    delayMs = Math.min(5000, delayMs * 2);
  }
}
