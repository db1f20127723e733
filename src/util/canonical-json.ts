/**
 * Canonical JSON: object keys sorted at every level, undefined members left out, so the same value
 * always serialises to the same text whatever order its keys came in. The activity store compares
 * an ingested event with a stored one by it (the SQLite store's worker on a replay; the PostgreSQL
 * store keeps it as the stored text), and idempotency bindings hash request bodies by it.
 */

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Sorted-key JSON: the same record always serialises to the same text. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (isObj(v))
    return `{${Object.keys(v)
      .sort()
      .filter((k) => v[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k])}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}
