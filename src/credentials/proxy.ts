/**
 * POST /api/v2/credential-proxy/http (spec 4.14): a workload's HTTP call made by the server with a
 * leased credential injected into the outbound request only, and the credential scrubbed from
 * what comes back.
 *
 * Order of checks, each denial with its own code and nothing sent upstream before all pass:
 * the lease (exists, active, not past expires_at, scope = agent + instance + session, has a
 * policy), the URL (http or https), the policy (host, path prefix, method, header allowlist), then
 * the resolved address (address-class.ts: a loopback, link-local, metadata, unspecified or
 * multicast address only when the policy names that address itself, as an exact IP-literal entry,
 * or `localhost` for loopback; a name that resolves to one is refused even when the policy lists
 * the name). The request is then sent by undici through a dispatcher
 * whose connect lookup answers with the address that was checked, so a name that resolves
 * differently a moment later (DNS rebinding) is never dialled.
 *
 * Redirects are not followed (a 3xx comes back as is). The upstream call is bounded by
 * SVC_CREDENTIAL_PROXY_TIMEOUT_MS (connect, headers and body together) and the response body by
 * SVC_CREDENTIAL_PROXY_MAX_RESPONSE_BYTES; the body is returned as UTF-8 text.
 */
import { lookup } from 'node:dns/promises';
import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { Agent, request } from 'undici';
import { SvcError, type ErrorCode } from '../core/errors.js';
import { classifyAddress, isSpecialAddress } from './address-class.js';
import type { LeaseRecord } from './lease-types.js';
import { checkTarget, FORBIDDEN_HEADERS, type Denial } from './policy.js';
import type { CredentialProxyRequest, CredentialProxyResponse } from '../wire/credentials.js';

/** The validated request body. */
export type ProxyCall = Readonly<CredentialProxyRequest>;

export type ProxyResponse = CredentialProxyResponse;

export interface ProxyLimits {
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
}

const bad = (message: string): SvcError => new SvcError('request.invalid', message);
const ID_MAX = 256;

function str(o: Record<string, unknown>, k: string, max: number): string {
  const v = o[k];
  if (typeof v !== 'string' || v.length === 0 || v.length > max) throw bad(`${k} must be a non-empty string of at most ${max} characters`);
  return v;
}

/** Validates the body (400 request.invalid naming the field). */
export function parseProxyCall(v: unknown): ProxyCall {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad('the body must be a JSON object');
  const o = v as Record<string, unknown>;
  const sessionId = o['session_id'];
  if (sessionId !== undefined && sessionId !== null && (typeof sessionId !== 'string' || sessionId.length > ID_MAX)) {
    throw bad('session_id must be a string or null');
  }
  const method = str(o, 'method', 16).toUpperCase();
  if (!/^[A-Z]+$/.test(method)) throw bad('method must be an HTTP method');
  const headers = o['headers'] ?? {};
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) throw bad('headers must be an object of strings');
  const hs: Record<string, string> = {};
  for (const [k, val] of Object.entries(headers as Record<string, unknown>)) {
    if (typeof val !== 'string' || !/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/.test(k) || /[\r\n\0]/.test(val)) {
      throw bad(`headers.${k.slice(0, 64)} must be a header name with a string value`);
    }
    const name = k.toLowerCase();
    if (name in hs) throw bad(`header ${name} is given twice`);
    hs[name] = val;
  }
  const body = o['body'] ?? null;
  if (body !== null && typeof body !== 'string') throw bad('body must be a string or null');
  if (body !== null && (method === 'GET' || method === 'HEAD')) throw bad(`a ${method} request cannot carry a body`);
  return {
    lease_id: str(o, 'lease_id', ID_MAX),
    agent_id: str(o, 'agent_id', ID_MAX),
    instance_id: str(o, 'instance_id', ID_MAX),
    session_id: typeof sessionId === 'string' ? sessionId : null,
    method,
    url: str(o, 'url', 8192),
    headers: hs,
    body,
  };
}

/** A denial as an error (its code's 4xx). */
export function deny(d: Denial): SvcError {
  return new SvcError(d.code, d.message, { reason_code: d.code });
}

/** The lease checks, in order; null when the lease may be used for this call. */
export function checkLease(lease: LeaseRecord | undefined, call: ProxyCall, nowMs: number): Denial | null {
  if (lease === undefined) return { code: 'credential_proxy.lease_not_found', message: `no credential lease ${call.lease_id}` };
  if (lease.state === 'revoked') return { code: 'credential_proxy.lease_revoked', message: 'the lease was revoked' };
  if (lease.state === 'expired' || Date.parse(lease.expires_at) <= nowMs)
    return { code: 'credential_proxy.lease_expired', message: 'the lease expired' };
  if (
    lease.agent_id !== call.agent_id ||
    lease.instance_id !== call.instance_id ||
    (lease.session_id !== null && lease.session_id !== call.session_id)
  ) {
    return { code: 'credential_proxy.scope_mismatch', message: 'agent_id, instance_id or session_id do not match the lease' };
  }
  if (lease.proxy_policy === null) return { code: 'credential_proxy.policy_missing', message: 'the lease has no proxy policy' };
  return null;
}

/** An address the target resolved to, checked. */
export interface DialAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/**
 * The addresses to dial, in the resolver's order: every one checked against the special classes
 * (one refused refuses the call); a denial or an upstream failure otherwise. All of them are
 * kept: `localhost` is ::1 and 127.0.0.1 on most machines, and a server may listen on one only.
 */
export async function resolveTarget(url: URL, exact: boolean): Promise<{ addresses: readonly DialAddress[] } | Denial> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const literal = isIP(host) !== 0;
  let addresses: { address: string; family: number }[];
  if (literal) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch {
      return { code: 'credential_proxy.upstream_unreachable', message: `host ${url.hostname} does not resolve` };
    }
  }
  for (const a of addresses) {
    const cls = classifyAddress(a.address);
    if (cls === null) continue;
    // A special address is reached only through a policy entry that names it: the IP literal
    // itself, or `localhost` for loopback. A name that merely resolves there (DNS rebinding, an
    // /etc/hosts alias) is refused even when the policy lists the name.
    const allowed = !isSpecialAddress(cls) || (exact && (literal || (host === 'localhost' && cls === 'loopback')));
    if (!allowed) {
      return {
        code: 'credential_proxy.address_not_allowed',
        message: `${url.hostname} resolves to a ${cls.replace('_', '-')} address, which the policy does not name explicitly`,
      };
    }
  }
  if (addresses.length === 0) return { code: 'credential_proxy.upstream_unreachable', message: `host ${url.hostname} has no address` };
  return { addresses: addresses.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 })) };
}

/** The policy and address checks for a call whose lease passed; returns the parsed URL and address. */
export async function checkCall(
  lease: LeaseRecord,
  call: ProxyCall,
  injectedHeader: string,
): Promise<Denial | { url: URL; addresses: readonly DialAddress[] }> {
  let url: URL;
  try {
    url = new URL(call.url);
  } catch {
    throw bad('url is not an absolute URL');
  }
  const policy = lease.proxy_policy;
  if (policy === null) return { code: 'credential_proxy.policy_missing', message: 'the lease has no proxy policy' };
  const names = Object.keys(call.headers);
  for (const n of names) {
    if (FORBIDDEN_HEADERS.has(n) || n === injectedHeader)
      return { code: 'credential_proxy.header_not_allowed', message: `header ${n} cannot be sent through the proxy` };
  }
  const t = checkTarget(policy, { method: call.method, url, headerNames: names });
  if (t.code !== null) return t;
  const target = await resolveTarget(url, t.host === 'exact');
  if ('code' in target) return target;
  return { url, ...target };
}

/** The forms of the value that are scrubbed from responses. */
export function redactionForms(value: string): string[] {
  const b = Buffer.from(value, 'utf8');
  const forms = [
    value,
    b.toString('base64'),
    b.toString('base64').replace(/=+$/, ''),
    b.toString('base64url'),
    encodeURIComponent(value),
    // as it appears inside a JSON string (quotes, backslashes, control characters escaped)
    JSON.stringify(value).slice(1, -1),
  ];
  return [...new Set(forms.filter((f) => f.length > 0))].sort((x, y) => y.length - x.length);
}

export const REDACTED = '[REDACTED]';

export function redact(text: string, forms: readonly string[]): string {
  let out = text;
  for (const f of forms) if (out.includes(f)) out = out.split(f).join(REDACTED);
  return out;
}

/** Sends the checked call with the credential injected; the response redacted. */
export async function send(
  call: ProxyCall,
  target: { url: URL; addresses: readonly DialAddress[] },
  inject: { headerName: string; valuePrefix: string; value: string },
  limits: ProxyLimits,
): Promise<ProxyResponse> {
  const dispatcher = new Agent({
    connectTimeout: limits.timeoutMs,
    headersTimeout: limits.timeoutMs,
    bodyTimeout: limits.timeoutMs,
    connections: 1,
    pipelining: 0,
    connect: {
      autoSelectFamily: true,
      // The addresses dialled are the ones checked above, whatever the name resolves to now; with
      // several (localhost: ::1 and 127.0.0.1), Node's connect tries them in turn.
      lookup: (_host, opts, cb) => {
        const first = target.addresses[0]!;
        if (opts.all === true)
          (cb as (e: null, a: LookupAddress[]) => void)(
            null,
            target.addresses.map((a) => ({ ...a })),
          );
        else cb(null, first.address, first.family);
      },
    },
  });
  const forms = redactionForms(inject.value);
  const abort = AbortSignal.timeout(limits.timeoutMs);
  try {
    const res = await request(target.url, {
      dispatcher,
      method: call.method as 'GET',
      // identity first: the value must be visible in the body to be redacted (decode() handles
      // an upstream that compresses anyway).
      headers: { ...call.headers, 'accept-encoding': 'identity', [inject.headerName]: `${inject.valuePrefix}${inject.value}` },
      body: call.body,
      signal: abort,
    });
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of res.body) {
      const b = chunk as Buffer;
      bytes += b.length;
      if (bytes > limits.maxResponseBytes) {
        res.body.destroy();
        throw new SvcError('credential_proxy.response_too_large', `the upstream response is larger than ${limits.maxResponseBytes} bytes`);
      }
      chunks.push(b);
    }
    const encoding = headerText(res.headers['content-encoding']).trim().toLowerCase();
    const body = decode(Buffer.concat(chunks), encoding, limits.maxResponseBytes);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) {
      // The body is returned decoded, so its encoding and length headers no longer describe it.
      if (v === undefined || (encoding !== '' && (k === 'content-encoding' || k === 'content-length'))) continue;
      headers[redact(k, forms)] = redact(headerText(v), forms);
    }
    return { status: res.statusCode, headers, body: redact(body.toString('utf8'), forms) };
  } catch (err) {
    if (err instanceof SvcError) throw err;
    throw upstreamError(err, limits.timeoutMs);
  } finally {
    void dispatcher.destroy().catch(() => undefined);
  }
}

function headerText(v: string | string[] | undefined): string {
  return v === undefined ? '' : Array.isArray(v) ? v.join(', ') : v;
}

/** The body without its content encoding (gzip, deflate, br), bounded; other encodings are refused. */
function decode(body: Buffer, encoding: string, maxBytes: number): Buffer {
  if (encoding === '' || encoding === 'identity') return body;
  const opts = { maxOutputLength: maxBytes };
  try {
    if (encoding === 'gzip' || encoding === 'x-gzip') return gunzipSync(body, opts);
    if (encoding === 'deflate') return inflateSync(body, opts);
    if (encoding === 'br') return brotliDecompressSync(body, opts);
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new SvcError('credential_proxy.response_too_large', `the decoded upstream response is larger than ${maxBytes} bytes`);
    }
    throw new SvcError('credential_proxy.response_encoding', `the upstream's ${encoding} body does not decode`);
  }
  throw new SvcError(
    'credential_proxy.response_encoding',
    `the upstream answered with content encoding ${encoding.slice(0, 32)}, which the proxy cannot decode to redact the credential`,
  );
}

function upstreamError(err: unknown, timeoutMs: number): SvcError {
  const e = err as { code?: string; name?: string };
  const timeout = e.name === 'TimeoutError' || e.name === 'AbortError' || (e.code ?? '').endsWith('_TIMEOUT');
  const code: ErrorCode = timeout ? 'credential_proxy.upstream_timeout' : 'credential_proxy.upstream_unreachable';
  // The message names the failure class only: an error's text could quote the request.
  return new SvcError(
    code,
    timeout ? `the upstream did not answer within ${timeoutMs} ms` : `the upstream call failed (${e.code ?? e.name ?? 'error'})`,
  );
}
