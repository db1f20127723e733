/**
 * A lease's proxy policy: which targets a workload may call with the leased credential, and the
 * matcher the credential proxy runs before anything is sent (spec 4.14 "Credential proxy rules").
 *
 * - `hosts`: exact host names or IP literals (`api.example.com`, `127.0.0.1`, `[::1]`), optionally
 *   with a port (`api.example.com:8443`), or a suffix wildcard `*.example.com` (any name below
 *   example.com, not example.com itself). An entry without a port allows any port of that host;
 *   with one, only that port (the scheme's default port when the URL names none).
 * - `path_prefixes`: the URL path must start with one; a prefix not ending in `/` matches at a
 *   segment boundary only (`/v1` allows `/v1` and `/v1/x`, not `/v1x`). Paths with encoded
 *   slashes, backslashes or dot segments are refused outright (no way to slip past a prefix).
 * - `methods`: upper-case HTTP methods.
 * - `header_allowlist`: the request headers the workload may send (lower-case names); any other
 *   workload header is a denial, not a silent drop. Hop-by-hop and framing headers, and the header
 *   the credential is injected into, can never be allowlisted.
 */
import { SvcError, type ErrorCode } from '../core/errors.js';
import type { ProxyPolicy } from '../wire/credentials.js';

export type { ProxyPolicy };

/** Headers a workload can never send through the proxy (framing, hop-by-hop, routing). */
export const FORBIDDEN_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'expect',
  // The proxy asks for identity bodies: a compressed one would hide the credential from redaction.
  'accept-encoding',
]);

const METHOD_RE = /^[A-Z]{1,16}$/;
const HEADER_RE = /^[a-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
const HOST_RE = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const MAX_ENTRIES = 64;

function bad(message: string): SvcError {
  return new SvcError('request.invalid', message);
}

function stringList(v: unknown, field: string, min: number): string[] {
  if (
    !Array.isArray(v) ||
    v.length < min ||
    v.length > MAX_ENTRIES ||
    !v.every((x) => typeof x === 'string' && x.length > 0 && x.length <= 256)
  ) {
    throw bad(`proxy_policy.${field} must be an array of ${min}-${MAX_ENTRIES} non-empty strings`);
  }
  return v as string[];
}

/** Splits a host entry into host and optional port; IPv6 literals in brackets. */
function splitHostPort(entry: string): { host: string; port: number | null } | null {
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(entry.toLowerCase());
  if (m === null) return null;
  const port = m[2] === undefined ? null : Number(m[2]);
  if (port !== null && (port < 1 || port > 65_535)) return null;
  return { host: m[1] as string, port };
}

/**
 * Validates a granted policy (400 request.invalid naming the field), normalised: hosts and header
 * names lower-case, methods upper-case. `injectedHeader` may not be allowlisted.
 */
export function parsePolicy(v: unknown, injectedHeader: string): ProxyPolicy {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad('proxy_policy must be an object');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!['hosts', 'path_prefixes', 'methods', 'header_allowlist'].includes(k)) throw bad(`proxy_policy.${k} is not a policy field`);
  }
  const hosts = stringList(o['hosts'], 'hosts', 1).map((h) => h.toLowerCase());
  for (const h of hosts) {
    const hp = splitHostPort(h);
    const ok = hp !== null && (hp.host.startsWith('[') || HOST_RE.test(hp.host));
    if (!ok) throw bad(`proxy_policy.hosts: "${h}" is not a host, host:port, [ipv6]:port or *.suffix`);
  }
  const pathPrefixes = stringList(o['path_prefixes'], 'path_prefixes', 1);
  for (const p of pathPrefixes) {
    if (!p.startsWith('/') || unsafePath(p))
      throw bad(`proxy_policy.path_prefixes: "${p}" must start with / and hold no dot segments or encoded slashes`);
  }
  const methods = stringList(o['methods'], 'methods', 1).map((m) => m.toUpperCase());
  for (const m of methods) if (!METHOD_RE.test(m)) throw bad(`proxy_policy.methods: "${m}" is not an HTTP method`);
  const headers = stringList(o['header_allowlist'] ?? [], 'header_allowlist', 0).map((h) => h.toLowerCase());
  for (const h of headers) {
    if (!HEADER_RE.test(h)) throw bad(`proxy_policy.header_allowlist: "${h}" is not a header name`);
    if (FORBIDDEN_HEADERS.has(h) || h === injectedHeader) {
      throw bad(
        `proxy_policy.header_allowlist: ${h} cannot be sent by a workload (framing header, or the header the credential is injected into)`,
      );
    }
  }
  return {
    hosts: [...new Set(hosts)],
    path_prefixes: [...new Set(pathPrefixes)],
    methods: [...new Set(methods)],
    header_allowlist: [...new Set(headers)],
  };
}

function unsafePath(path: string): boolean {
  return /%2f|%5c|%2e|\\/i.test(path) || path.split('/').some((s) => s === '.' || s === '..');
}

/** A denial: the error code and a message (no secret, no body). */
export interface Denial {
  readonly code: ErrorCode;
  readonly message: string;
}

/** What the matcher looks at in the outbound request. */
export interface OutboundTarget {
  readonly method: string;
  readonly url: URL;
  /** Workload-supplied header names, lower-case. */
  readonly headerNames: readonly string[];
}

/** How the URL's host matched: an exact entry lets it reach special addresses (address-class.ts). */
export type HostMatch = 'exact' | 'wildcard';

/** The default port of a scheme. */
export function defaultPort(url: URL): number {
  return url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
}

/** Matches the URL's host against the policy's hosts; null when none allows it. */
export function matchHost(policy: ProxyPolicy, url: URL): HostMatch | null {
  const host = url.hostname.toLowerCase();
  const port = defaultPort(url);
  let best: HostMatch | null = null;
  for (const entry of policy.hosts) {
    const hp = splitHostPort(entry);
    if (hp === null || (hp.port !== null && hp.port !== port)) continue;
    if (hp.host.startsWith('*.')) {
      const suffix = hp.host.slice(1);
      if (host.endsWith(suffix) && host.length > suffix.length && best === null) best = 'wildcard';
    } else if (hp.host === host) {
      return 'exact';
    }
  }
  return best;
}

/** Whether the path is allowed by one of the prefixes (segment-boundary rule above). */
export function matchPath(policy: ProxyPolicy, path: string): boolean {
  if (unsafePath(path)) return false;
  return policy.path_prefixes.some((p) => path === p || (path.startsWith(p) && (p.endsWith('/') || path[p.length] === '/')));
}

/**
 * The first rule the target breaks, checked in the order host, path, method, headers; null when
 * the policy allows it. The scheme must be http or https.
 */
export function checkTarget(policy: ProxyPolicy, t: OutboundTarget): Denial | { readonly code: null; readonly host: HostMatch } {
  if (t.url.protocol !== 'http:' && t.url.protocol !== 'https:') {
    return {
      code: 'credential_proxy.scheme_not_allowed',
      message: `scheme ${t.url.protocol.replace(/:$/, '')} is not allowed (http and https only)`,
    };
  }
  if (t.url.username !== '' || t.url.password !== '') {
    return { code: 'credential_proxy.host_not_allowed', message: 'URLs with user information are not allowed' };
  }
  const host = matchHost(policy, t.url);
  if (host === null) return { code: 'credential_proxy.host_not_allowed', message: `host ${t.url.host} is not in the lease's policy` };
  if (!matchPath(policy, t.url.pathname)) {
    return { code: 'credential_proxy.path_not_allowed', message: `path ${t.url.pathname} is not under the lease's path prefixes` };
  }
  if (!policy.methods.includes(t.method)) {
    return { code: 'credential_proxy.method_not_allowed', message: `method ${t.method} is not in the lease's policy` };
  }
  for (const h of t.headerNames) {
    if (!policy.header_allowlist.includes(h)) {
      return { code: 'credential_proxy.header_not_allowed', message: `header ${h} is not in the lease's header allowlist` };
    }
  }
  return { code: null, host };
}
