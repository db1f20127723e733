/**
 * Human output: aligned tables, relative times, sizes, and colour that is only used on a
 * terminal without NO_COLOR (the caller decides; see Output in io.ts).
 */

export interface Column<T> {
  readonly header: string;
  readonly value: (row: T) => string;
  /** Right-align (numbers). */
  readonly right?: boolean;
  /** Colour of a cell (applied after padding, so alignment is unaffected). */
  readonly color?: (row: T) => ColorName | undefined;
}

export type ColorName = 'red' | 'green' | 'yellow' | 'cyan' | 'dim' | 'bold';

const SGR: Record<ColorName, [number, number]> = {
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  cyan: [36, 39],
  dim: [2, 22],
  bold: [1, 22],
};

export function paint(text: string, color: ColorName | undefined, enabled: boolean): string {
  if (!enabled || color === undefined || text === '') return text;
  const [on, off] = SGR[color];
  return `\u001b[${on}m${text}\u001b[${off}m`;
}

/** Display width of a string: code points, ignoring escape sequences (good enough for ids and names). */
export function displayWidth(s: string): number {
  // eslint-disable-next-line no-control-regex
  return [...s.replace(/\u001b\[[0-9;]*m/g, '')].length;
}

/**
 * Rows as aligned columns with an upper-case header, two spaces apart, no trailing spaces.
 * An empty list gives `empty` (or nothing).
 */
export function renderTable<T>(rows: readonly T[], columns: readonly Column<T>[], opts: { color?: boolean; empty?: string } = {}): string {
  if (rows.length === 0) return opts.empty !== undefined ? `${opts.empty}\n` : '';
  const color = opts.color === true;
  const cells = rows.map((r) => columns.map((c) => sanitize(c.value(r))));
  const widths = columns.map((c, i) => Math.max(displayWidth(c.header), ...cells.map((row) => displayWidth(row[i] ?? ''))));
  const pad = (text: string, i: number, right: boolean | undefined): string => {
    const w = (widths[i] ?? 0) - displayWidth(text);
    return right === true ? ' '.repeat(w) + text : text + ' '.repeat(w);
  };
  const lines: string[] = [];
  lines.push(
    columns
      .map((c, i) => paint(pad(c.header, i, c.right), 'bold', color))
      .join('  ')
      .trimEnd(),
  );
  rows.forEach((r, ri) => {
    const line = columns.map((c, i) => {
      const text = cells[ri]?.[i] ?? '';
      const padded = pad(text, i, c.right);
      const name = c.color?.(r);
      if (!color || name === undefined) return padded;
      // Colour the text only, not the padding.
      return c.right === true
        ? ' '.repeat(padded.length - text.length) + paint(text, name, true)
        : paint(text, name, true) + ' '.repeat(padded.length - text.length);
    });
    lines.push(line.join('  ').trimEnd());
  });
  return `${lines.join('\n')}\n`;
}

/** `key: value` lines with the keys aligned. */
export function renderFields(fields: readonly (readonly [string, string])[]): string {
  const w = Math.max(0, ...fields.map(([k]) => k.length));
  return fields.map(([k, v]) => `${`${k}:`.padEnd(w + 1)}  ${sanitize(v)}`.trimEnd()).join('\n') + '\n';
}

/** Control characters would let a server-provided string move the cursor or recolour the terminal. */
export function sanitize(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => (c === '\t' ? ' ' : '?'));
}

/** `5s ago`, `3m ago`, `2h ago`, `4d ago` (or `in 5s`); `-` for a missing time. */
export function relativeTime(at: string | number | null | undefined, nowMs: number): string {
  if (at === null || at === undefined || at === '' || at === 0) return '-';
  const t = typeof at === 'number' ? at : Date.parse(at);
  if (!Number.isFinite(t)) return '-';
  const diffS = Math.round((nowMs - t) / 1000);
  const abs = Math.abs(diffS);
  const text =
    abs < 60
      ? `${abs}s`
      : abs < 3600
        ? `${Math.floor(abs / 60)}m`
        : abs < 86_400
          ? `${Math.floor(abs / 3600)}h`
          : `${Math.floor(abs / 86_400)}d`;
  if (abs < 1) return 'just now';
  return diffS >= 0 ? `${text} ago` : `in ${text}`;
}

/** Seconds as `45s`, `12m`, `3h4m`, `2d3h`; `-` for null. */
export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '-';
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86_400)}d${Math.floor((s % 86_400) / 3600)}h`;
}

/** Bytes in binary units: `512 B`, `1.5 KiB`, `8.0 GiB`. */
export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** Colour of a state or status word (VMs, agents, operations, tasks). */
export function stateColor(state: string): ColorName | undefined {
  switch (state.toLowerCase()) {
    case 'running':
    case 'ready':
    case 'completed':
    case 'ok':
      return 'green';
    case 'failed':
    case 'failed_preserved':
    case 'crashed':
    case 'error':
    case 'disconnected':
      return 'red';
    case 'pending':
    case 'starting':
    case 'staging':
    case 'provisioning':
    case 'completing':
    case 'busy':
    case 'stale':
    case 'paused':
    case 'shutdown':
    case 'degraded':
    case 'detached':
      return 'yellow';
    case 'stopped':
    case 'cancelled':
      return 'dim';
    default:
      return undefined;
  }
}

/** A text progress bar of `width` cells for 0-100. */
export function progressBar(percent: number, width = 24): string {
  const p = Math.max(0, Math.min(100, Math.round(percent)));
  const full = Math.round((p / 100) * width);
  return `[${'#'.repeat(full)}${'-'.repeat(width - full)}]`;
}
