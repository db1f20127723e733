/**
 * Duration strings of task manifests (`lifecycle.timeout`): one or more `<digits><unit>` parts in
 * the order d, h, m, s, each unit at most once, e.g. `90s`, `30m`, `2h`, `1h30m`, `7d`.
 * No sign, no fractions, no spaces, no bare numbers, no other units (`ms`, `y`, `w`).
 */

/** The syntax (the JSON Schema's `pattern` for durations is this regex's source). */
export const DURATION_RE = /^(?=\d)(?:(\d{1,7})d)?(?:(\d{1,7})h)?(?:(\d{1,7})m)?(?:(\d{1,7})s)?$/u;

const UNIT_MS = [86_400_000, 3_600_000, 60_000, 1_000] as const;

/** Milliseconds of a duration string, or null when it does not match {@link DURATION_RE}. */
export function parseDuration(text: string): number | null {
  const m = DURATION_RE.exec(text);
  if (m === null) return null;
  let ms = 0;
  for (let i = 0; i < UNIT_MS.length; i++) {
    const part = m[i + 1];
    if (part !== undefined) ms += Number(part) * (UNIT_MS[i] ?? 0);
  }
  return ms;
}

/** The shortest duration string for a whole number of seconds (`5400000` → `1h30m`); `0s` for zero. */
export function formatDuration(ms: number): string {
  let rest = Math.floor(ms / 1000) * 1000;
  if (rest <= 0) return '0s';
  let out = '';
  const units = ['d', 'h', 'm', 's'];
  for (let i = 0; i < UNIT_MS.length; i++) {
    const unit = UNIT_MS[i] ?? 1;
    const n = Math.floor(rest / unit);
    if (n > 0) out += `${n}${units[i] ?? ''}`;
    rest -= n * unit;
  }
  return out;
}
