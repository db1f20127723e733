/**
 * IP addresses and CIDR ranges as bytes, for trust decisions on a peer address
 * (SVC_TRUSTED_PROXIES). An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, or the expanded text
 * uWebSockets.js gives for an IPv4 peer of a dual-stack socket) is treated as its IPv4 address, so
 * one `127.0.0.0/8` rule covers both spellings.
 */

/** An address range: the network's bytes (4 for IPv4, 16 for IPv6) and its prefix length. */
export interface IpRange {
  readonly bytes: readonly number[];
  readonly prefix: number;
}

function parseIpv4(text: string): number[] | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    out.push(n);
  }
  return out;
}

function parseIpv6(text: string): number[] | null {
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const groups = (s: string): number[] | null => {
    if (s === '') return [];
    const out: number[] = [];
    const items = s.split(':');
    for (let i = 0; i < items.length; i++) {
      const g = items[i] ?? '';
      if (i === items.length - 1 && g.includes('.')) {
        const v4 = parseIpv4(g);
        if (v4 === null) return null;
        out.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
      } else {
        if (!/^[0-9A-Fa-f]{1,4}$/.test(g)) return null;
        out.push(parseInt(g, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0] ?? '');
  const tail = halves.length === 2 ? groups(halves[1] ?? '') : [];
  if (head === null || tail === null) return null;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const all = [...head, ...new Array<number>(missing).fill(0), ...tail];
  return all.flatMap((g) => [g >> 8, g & 0xff]);
}

/**
 * The bytes of an IP address (4 for IPv4 and IPv4-mapped IPv6, 16 for other IPv6), or null when
 * the text is not one. A zone (`fe80::1%eth0`) is ignored.
 */
export function parseIp(text: string): number[] | null {
  const t = text.trim();
  if (t.includes(':')) {
    const v6 = parseIpv6(t.replace(/%[^%]*$/, ''));
    if (v6 === null) return null;
    const mapped = v6.slice(0, 10).every((b) => b === 0) && v6[10] === 0xff && v6[11] === 0xff;
    return mapped ? v6.slice(12) : v6;
  }
  return parseIpv4(t);
}

/** `10.0.0.0/8`, `fd00::/8`, or a single address (its full length). Null when malformed. */
export function parseIpRange(text: string): IpRange | null {
  const [addr = '', prefixText, extra] = text.trim().split('/');
  if (extra !== undefined) return null;
  const bytes = parseIp(addr);
  if (bytes === null) return null;
  const bits = bytes.length * 8;
  // An IPv4-mapped network keeps its IPv4 meaning: ::ffff:10.0.0.0/104 is 10.0.0.0/8.
  const shift = addr.includes(':') && bytes.length === 4 ? 96 : 0;
  if (prefixText === undefined) return { bytes, prefix: bits };
  if (!/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = Number(prefixText) - shift;
  if (prefix < 0 || prefix > bits) return null;
  return { bytes, prefix };
}

/** True when the address (text) lies in one of the ranges. A malformed address is in none. */
export function ipInRanges(address: string, ranges: readonly IpRange[]): boolean {
  const bytes = parseIp(address);
  if (bytes === null) return false;
  return ranges.some((r) => {
    if (r.bytes.length !== bytes.length) return false;
    let left = r.prefix;
    for (let i = 0; left > 0; i++, left -= 8) {
      const mask = left >= 8 ? 0xff : (0xff << (8 - left)) & 0xff;
      if (((r.bytes[i] ?? 0) & mask) !== ((bytes[i] ?? 0) & mask)) return false;
    }
    return true;
  });
}
