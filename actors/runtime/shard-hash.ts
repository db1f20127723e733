/**
 * Which shard an actor lives in: FNV-1a (32-bit) over the UTF-8 bytes of the id's placement key,
 * mod the shard count. Stable across processes and versions, so ids keep their shard after a
 * restart.
 *
 * The placement key is the id up to its first `/` (the whole id when it has none). Related
 * actors share a prefix so they share a shard and their work is ordered without locks:
 * `agent:a1` (the connection), `agent:a1/cmd/c7` (a command's replay ring) and
 * `agent:a1/vm-ops` (its VM's operation queue) all live where `agent:a1` lives (DESIGN.md).
 */

const kFnvOffset = 0x811c9dc5;
const kFnvPrime = 0x01000193;

function mix(h: number, byte: number): number {
  return Math.imul(h ^ byte, kFnvPrime);
}

/** FNV-1a 32-bit hash of the UTF-8 encoding of `s` (unsigned), without allocating. */
export function fnv1a32(s: string): number {
  let h = kFnvOffset;
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      h = mix(h, c);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00);
    } else if (c >= 0xd800 && c <= 0xdfff) {
      c = 0xfffd; // a lone surrogate encodes as U+FFFD, as TextEncoder does
    }
    if (c < 0x800) {
      h = mix(mix(h, 0xc0 | (c >> 6)), 0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      h = mix(mix(mix(h, 0xe0 | (c >> 12)), 0x80 | ((c >> 6) & 0x3f)), 0x80 | (c & 0x3f));
    } else {
      h = mix(mix(mix(mix(h, 0xf0 | (c >> 18)), 0x80 | ((c >> 12) & 0x3f)), 0x80 | ((c >> 6) & 0x3f)), 0x80 | (c & 0x3f));
    }
  }
  return h >>> 0;
}

/** The part of `id` that decides its shard: up to the first `/`. */
export function placementKey(id: string): string {
  const slash = id.indexOf('/');
  return slash < 0 ? id : id.slice(0, slash);
}

/** The shard index (0 … shards-1) of actor `id`. */
export function shardIndexOf(id: string, shards: number): number {
  return fnv1a32(placementKey(id)) % shards;
}
