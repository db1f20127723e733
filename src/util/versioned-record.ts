/**
 * Rows stored as JSON with a version field `v` (the sessions and operations stores): the parsed
 * object when it is one of this version, else why the row is rejected (the store skips and
 * reports it instead of failing its start).
 */
export function versionedRecord(text: string, version: number): Record<string, unknown> | string {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return 'not JSON';
  }
  if (typeof raw !== 'object' || raw === null) return 'not an object';
  const o = raw as Record<string, unknown>;
  if (o['v'] !== version) return `unknown record version ${String(o['v'])}`;
  return o;
}
