/**
 * Which addresses the credential proxy refuses to dial unless the lease's policy names the address
 * itself, as an IP literal (or `localhost` for loopback) — our decision; the spec only says
 * targets outside the policy are denied (proxy.ts applies it):
 *
 * | class | ranges |
 * |---|---|
 * | `unspecified` | 0.0.0.0/8, :: |
 * | `loopback` | 127.0.0.0/8, ::1 |
 * | `link_local` | 169.254.0.0/16, fe80::/10 |
 * | `metadata` | 169.254.169.254, fd00:ec2::254 (cloud instance metadata; checked before link_local) |
 * | `multicast` | 224.0.0.0/4, 255.255.255.255, ff00::/8 |
 *
 * An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) is its IPv4 address. Private ranges
 * (10/8, 172.16/12, 192.168/16, fc00::/7 including fd00::/8) are ordinary: a policy may name an
 * internal API, and the host must be in the policy anyway; this check is about addresses a name
 * can resolve to without the operator having meant them (the proxy host itself, the metadata
 * service).
 */
import { ipInRanges, parseIpRange, type IpRange } from '../util/ip.js';

export type AddressClass = 'public' | 'unspecified' | 'loopback' | 'link_local' | 'metadata' | 'multicast';

function ranges(...texts: string[]): IpRange[] {
  return texts.map((t) => {
    const r = parseIpRange(t);
    if (r === null) throw new Error(`bad range ${t}`);
    return r;
  });
}

const CLASSES: readonly (readonly [AddressClass, readonly IpRange[]])[] = [
  ['metadata', ranges('169.254.169.254/32', 'fd00:ec2::254/128')],
  ['unspecified', ranges('0.0.0.0/8', '::/128')],
  ['loopback', ranges('127.0.0.0/8', '::1/128')],
  ['link_local', ranges('169.254.0.0/16', 'fe80::/10')],
  ['multicast', ranges('224.0.0.0/4', '255.255.255.255/32', 'ff00::/8')],
];

/** The class of an IP address (text); null when it is not an IP address. */
export function classifyAddress(address: string): AddressClass | null {
  if (parseIpRange(address) === null) return null;
  for (const [cls, rs] of CLASSES) if (ipInRanges(address, rs)) return cls;
  return 'public';
}

/** Whether an address of this class may be dialled only when the policy names the host exactly. */
export function isSpecialAddress(cls: AddressClass): boolean {
  return cls !== 'public';
}
