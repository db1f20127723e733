/**
 * The origin a caller reached us by, for the URLs a response carries (README "Decisions where the
 * spec is silent": URLs in responses). Behind a reverse proxy or a tunnel the listen address is
 * not what the caller dialled, so URLs are built from the request:
 *
 * - host: the `Host` header; from a trusted peer (SVC_TRUSTED_PROXIES) `Forwarded: host=` or else
 *   `X-Forwarded-Host` comes first. Only a syntactically valid host (a DNS name, an IPv4 address
 *   or a bracketed IPv6 literal, optional port 1-65535) is used; anything else is never echoed and
 *   the next source is tried, down to the listener's own address (a wildcard one as 127.0.0.1).
 * - scheme: `http`; from a trusted peer `Forwarded: proto=` or else `X-Forwarded-Proto`, when it
 *   is `http` or `https`.
 * - From a list of forwarded values (several proxies, or a repeated header) the last one is taken:
 *   the one the trusted peer itself added, never one a client could have written ahead of it.
 *
 * `listenerUrl` builds the URL of another listener (the WebSocket listener, spec 4.18): the
 * request's host name with that listener's port, since it is reached on the same machine name.
 */
import { isIP } from 'node:net';
import { ipInRanges, type IpRange } from '../util/ip.js';
import type { RequestView } from './types.js';

export interface PublicUrlConfig {
  /** Peers whose forwarded headers are believed (config SVC_TRUSTED_PROXIES). */
  readonly trustedProxies: readonly IpRange[];
  /** The listener the request came in on (configured host, bound port): the last resort. */
  listener(): { readonly host: string; readonly port: number };
}

export interface PublicOrigin {
  readonly scheme: 'http' | 'https';
  /** Lower-case DNS name, IPv4 address, or bracketed IPv6 literal (`[::1]`). */
  readonly hostname: string;
  /** The explicit port, or null when the scheme's default applies. */
  readonly port: number | null;
}

const LABEL = '[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?';
const HOST_RE = new RegExp(`^(?:\\[([0-9a-f:.]+)\\]|(${LABEL}(?:\\.${LABEL})*))(?::(\\d{1,5}))?$`);
const ENDS_IN_NUMBER_RE = /(?:^|\.)(?:\d+|0x[0-9a-f]*)$/;
const WILDCARD_HOSTS = new Set(['', '0.0.0.0', '::', '[::]']);

/** A Host-header style `host[:port]`, validated; null for anything that is not one. */
export function parseHostHeader(value: string | undefined): { hostname: string; port: number | null } | null {
  if (value === undefined) return null;
  const v = value.trim().toLowerCase();
  if (v === '' || v.length > 261) return null;
  const m = HOST_RE.exec(v);
  if (m === null) return null;
  const [, v6, name, portText] = m;
  if (v6 !== undefined && isIP(v6) !== 6) return null;
  if (name !== undefined && name.length > 253) return null;
  // A name whose last label is a number is an IPv4 address to URL parsers (WHATWG's "ends in a
  // number"): `a.0` or `1.2.3` would be refused or rewritten there, so only a dotted quad passes.
  if (name !== undefined && ENDS_IN_NUMBER_RE.test(name) && isIP(name) !== 4) return null;
  let port: number | null = null;
  if (portText !== undefined) {
    port = Number(portText);
    if (port < 1 || port > 65535) return null;
  }
  return { hostname: v6 !== undefined ? `[${v6}]` : (name ?? ''), port };
}

/** Splits on `sep` outside double quotes. */
function splitUnquoted(s: string, sep: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i] ?? '';
    if (c === '"') quoted = !quoted;
    else if (c === '\\' && quoted) {
      cur += c + (s[i + 1] ?? '');
      i++;
      continue;
    }
    if (c === sep && !quoted) {
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  out.push(cur);
  return out;
}

/** The `proto` and `host` of the last element of an RFC 7239 Forwarded header. */
function lastForwarded(header: string | undefined): { proto?: string; host?: string } {
  if (header === undefined) return {};
  const elements = splitUnquoted(header, ',');
  const last = elements[elements.length - 1] ?? '';
  const out: { proto?: string; host?: string } = {};
  for (const pair of splitUnquoted(last, ';')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    const key = pair.slice(0, eq).trim().toLowerCase();
    let value = pair.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1).replace(/\\(.)/g, '$1');
    if (key === 'proto') out.proto = value;
    else if (key === 'host') out.host = value;
  }
  return out;
}

/** The last comma-separated value of an X-Forwarded-* header. */
function lastValue(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const parts = header.split(',');
  return parts[parts.length - 1]?.trim();
}

function schemeOf(value: string | undefined): 'http' | 'https' | null {
  const v = value?.trim().toLowerCase();
  return v === 'http' || v === 'https' ? v : null;
}

function listenerHost(host: string): string {
  if (WILDCARD_HOSTS.has(host)) return '127.0.0.1';
  return isIP(host) === 6 ? `[${host.toLowerCase()}]` : host.toLowerCase();
}

/** The origin the caller reached us by (file comment). */
export function publicOrigin(req: Pick<RequestView, 'headers' | 'remoteAddress'>, cfg: PublicUrlConfig): PublicOrigin {
  const h = req.headers;
  const trusted = ipInRanges(req.remoteAddress, cfg.trustedProxies);
  let scheme: 'http' | 'https' = 'http';
  const hosts: (string | undefined)[] = [];
  if (trusted) {
    const fwd = lastForwarded(h['forwarded']);
    scheme = schemeOf(fwd.proto) ?? schemeOf(lastValue(h['x-forwarded-proto'])) ?? 'http';
    hosts.push(fwd.host, lastValue(h['x-forwarded-host']));
  }
  hosts.push(h['host']);
  for (const candidate of hosts) {
    const host = parseHostHeader(candidate);
    if (host !== null) return { scheme, ...host };
  }
  const l = cfg.listener();
  return { scheme, hostname: listenerHost(l.host), port: l.port };
}

/** `http(s)://host[:port]`, or its `ws(s)` form. */
export function originUrl(o: PublicOrigin, kind: 'http' | 'ws' = 'http'): string {
  const scheme = kind === 'ws' ? (o.scheme === 'https' ? 'wss' : 'ws') : o.scheme;
  return `${scheme}://${o.hostname}${o.port === null ? '' : `:${o.port}`}`;
}

/** Another listener on the same machine name: `scheme://<request host name>:<port>/`. */
export function listenerUrl(o: PublicOrigin, scheme: 'ws' | 'http', port: number): string {
  return `${scheme}://${o.hostname}:${port}/`;
}
