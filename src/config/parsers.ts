/**
 * Value parsers for the configuration schema. Each takes the raw string of one variable and
 * returns the typed value or throws ConfigValueError with a reason (the loader adds the name).
 */
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { parseIpRange, type IpRange } from '../util/ip.js';

export class ConfigValueError extends Error {}

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** "host:port", "[v6]:port" or ":port" (host defaults to 127.0.0.1). Port 0 means any free port. */
export function parseListenAddress(raw: string): ListenAddress {
  const v = raw.trim();
  let host: string;
  let portText: string;
  if (v.startsWith('[')) {
    const end = v.indexOf(']');
    if (end < 0 || v[end + 1] !== ':') throw new ConfigValueError(`expected [ipv6]:port, got "${raw}"`);
    host = v.slice(1, end);
    portText = v.slice(end + 2);
    if (isIP(host) !== 6) throw new ConfigValueError(`"${host}" is not an IPv6 address`);
  } else {
    const idx = v.lastIndexOf(':');
    if (idx < 0) throw new ConfigValueError(`expected host:port, got "${raw}"`);
    host = v.slice(0, idx) || '127.0.0.1';
    portText = v.slice(idx + 1);
    if (host.includes(':')) throw new ConfigValueError(`IPv6 addresses need brackets: [${host}]:port`);
  }
  if (!/^\d{1,5}$/.test(portText)) throw new ConfigValueError(`port "${portText}" is not a number`);
  const port = Number(portText);
  if (port > 65535) throw new ConfigValueError(`port ${port} is out of range 0-65535`);
  if (host !== 'localhost' && isIP(host) === 0 && !/^[A-Za-z0-9.-]{1,253}$/.test(host)) {
    throw new ConfigValueError(`"${host}" is not a host name or IP address`);
  }
  return Object.freeze({ host, port });
}

/** A listen address, or `off` (null): a listener that can be turned off. */
export function parseListenAddressOrOff(raw: string): ListenAddress | null {
  return raw.trim().toLowerCase() === 'off' ? null : parseListenAddress(raw);
}

/** True for addresses that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host.toLowerCase() === '::ffff:127.0.0.1';
}

export function formatAddress(a: ListenAddress): string {
  return isIP(a.host) === 6 ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}

export function parseIntInRange(min: number, max: number): (raw: string) => number {
  return (raw) => {
    const v = raw.trim();
    if (!/^-?\d+$/.test(v)) throw new ConfigValueError(`"${raw}" is not an integer`);
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new ConfigValueError(`${n} is out of range ${min}-${max}`);
    return n;
  };
}

/** Sizes: a plain byte count or a number with KiB/MiB/GiB (binary) or KB/MB/GB (decimal). */
export function parseBytes(min: number, max: number): (raw: string) => number {
  const units: Record<string, number> = { '': 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, kb: 1e3, mb: 1e6, gb: 1e9 };
  return (raw) => {
    const m = /^\s*(\d+)\s*([a-zA-Z]*)\s*$/.exec(raw);
    const unit = units[(m?.[2] ?? '').toLowerCase()];
    if (!m || unit === undefined) throw new ConfigValueError(`"${raw}" is not a size (e.g. 1048576, 64KiB, 4MiB, 50GB)`);
    const n = Number(m[1]) * unit;
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new ConfigValueError(`${n} bytes is out of range ${min}-${max}`);
    return n;
  };
}

/** "0" or "1" (also true/false, yes/no for convenience). */
export function parseFlag(raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (v === '1' || v === 'true' || v === 'yes') return true;
  if (v === '0' || v === 'false' || v === 'no' || v === '') return false;
  throw new ConfigValueError(`"${raw}" is not 0 or 1`);
}

export function parseEnum<T extends string>(allowed: readonly T[]): (raw: string) => T {
  return (raw) => {
    const v = raw.trim().toLowerCase();
    const hit = allowed.find((a) => a === v);
    if (hit === undefined) throw new ConfigValueError(`"${raw}" is not one of ${allowed.join(', ')}`);
    return hit;
  };
}

export function parseNonEmpty(raw: string): string {
  const v = raw.trim();
  if (v === '') throw new ConfigValueError('must not be empty');
  if (v.includes('\0')) throw new ConfigValueError('must not contain NUL');
  return v;
}

/** Comma- (or space-) separated list of non-empty items. */
export function parseList(raw: string): readonly string[] {
  return Object.freeze(
    raw
      .split(/[\s,]+/)
      .map((s) => s.trim())
      .filter((s) => s !== ''),
  );
}

/** "a=b,c=d" pairs; both sides non-empty. */
export function parsePairs(raw: string): readonly (readonly [string, string])[] {
  return Object.freeze(
    parseList(raw).map((item) => {
      const idx = item.indexOf('=');
      if (idx <= 0 || idx === item.length - 1) throw new ConfigValueError(`"${item}" is not key=value`);
      return Object.freeze([item.slice(0, idx), item.slice(idx + 1)] as const);
    }),
  );
}

/** Comma- or space-separated IP addresses and CIDR ranges; `none` is the empty list. */
export function parseIpRanges(raw: string): readonly IpRange[] {
  const items = parseList(raw);
  if (items.length === 1 && items[0]?.toLowerCase() === 'none') return Object.freeze([]);
  return Object.freeze(
    items.map((item) => {
      const r = parseIpRange(item);
      if (r === null) throw new ConfigValueError(`"${item}" is not an IP address or CIDR range (e.g. 10.0.0.0/8, fd00::/8, ::1)`);
      return r;
    }),
  );
}

export function parseUrl(protocols: readonly string[]): (raw: string) => string {
  return (raw) => {
    let u: URL;
    try {
      u = new URL(raw.trim());
    } catch {
      throw new ConfigValueError(`"${raw}" is not a URL`);
    }
    if (!protocols.includes(u.protocol)) throw new ConfigValueError(`scheme must be one of ${protocols.join(', ')}`);
    return u.toString();
  };
}

/** A libvirt connection URI, or several separated by commas (one per host). */
export function parseHypervisorUris(raw: string): readonly string[] {
  const uris = parseList(raw);
  if (uris.length === 0) throw new ConfigValueError('at least one URI is required');
  for (const u of uris) {
    if (!/^[a-z][a-z0-9+.-]*:\/\/[^\s]*$/.test(u))
      throw new ConfigValueError(`"${u}" is not a libvirt URI (e.g. test:///default, qemu:///system)`);
  }
  return uris;
}

/** A JSON array of 1-64 non-empty strings (an argv template). */
export function parseJsonArgv(raw: string): readonly string[] {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new ConfigValueError('is not JSON (expected an array of strings such as ["claude","-p","{prompt}"])');
  }
  if (!Array.isArray(v) || v.length === 0 || v.length > 64 || !v.every((x) => typeof x === 'string' && x !== '' && !x.includes('\0'))) {
    throw new ConfigValueError('must be a JSON array of 1-64 non-empty strings');
  }
  return Object.freeze(v as string[]);
}

/** SVC_ACTIVITY_STORE: `sqlite`, or a PostgreSQL URL (postgres:// or postgresql://). */
export type ActivityStoreSetting = { readonly kind: 'sqlite' } | { readonly kind: 'postgres'; readonly url: string };

export function parseActivityStore(raw: string): ActivityStoreSetting {
  const v = raw.trim();
  if (v === 'sqlite') return { kind: 'sqlite' };
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    // Never echo the value: it may be a URL with a password that failed to parse.
    throw new ConfigValueError('must be `sqlite` or a postgres:// URL (the value is not shown: it may hold a password)');
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:')
    throw new ConfigValueError('must be `sqlite` or a postgres:// URL (the value is not shown: it may hold a password)');
  return { kind: 'postgres', url: u.toString() };
}

/** An activity scope value (SVC_TENANT_ID, SVC_HOST_ID): letters, digits and . _ : @ / + -, at most 256. */
const kActivityIdRe = /^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,255}$/;

export function parseActivityId(raw: string): string {
  const v = raw.trim();
  if (!kActivityIdRe.test(v))
    throw new ConfigValueError('must be an id: letters, digits and . _ : @ / + -, starting with a letter or digit, at most 256');
  return v;
}

/**
 * This server's host id: SVC_HOST_ID, or the host name made an id (characters outside the set
 * become '-'). The activity sandboxd records names it; the fleet inventory on PostgreSQL is scoped
 * by it.
 */
export function serverHostId(config: { readonly hostId: string | null }, name: string = hostname()): string {
  if (config.hostId !== null) return config.hostId;
  const id = name
    .replace(/[^A-Za-z0-9._:@/+-]/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 256);
  return kActivityIdRe.test(id) ? id : 'host';
}
