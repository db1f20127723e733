/**
 * What the HTML report reads out of result lines: HDR percentile series, workers-vs-inline
 * figures, the remaining extras flattened to rows, the status and the target, plus escaping and
 * number formatting. Everything here is pure; report-html.ts lays it out.
 *
 * Percentile series: a line may carry `histogram: {unit, percentiles: [[p, v], …]}` (one series,
 * named after the scenario) or `histograms: {name: {unit, percentiles}}`; any other object of that
 * shape deeper in the extras (e.g. `workers.ws`) is found too, named by its path. `p` is a
 * percentile in percent (50, 99, 99.9, 100 = max); a series whose every p is ≤ 1 is read as
 * fractions (0.99) and scaled.
 */
import type { JsonValue, ResultLine } from '../types.js';

/** The contract fields of a result line (everything else is an extra). */
export const CONTRACT_FIELDS = new Set(['scenario', 'value', 'unit', 'ceiling', 'ratio', 'target', 'pass', 'problems', 'error', 'seconds']);

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML element content and quoted attribute values. */
export function esc(text: unknown): string {
  return String(text).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** A readable number: thousands separated, fewer decimals the larger it is. */
export function fmt(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  const abs = Math.abs(n);
  const digits = abs >= 1000 ? 0 : abs >= 100 ? 1 : abs >= 1 ? 2 : 3;
  return n.toLocaleString('en-US', { maximumFractionDigits: digits });
}

export interface Series {
  readonly name: string;
  readonly unit: string;
  /** [percentile in percent, value], sorted by percentile. */
  readonly points: readonly (readonly [number, number])[];
}

function isObject(v: JsonValue | undefined): v is { readonly [key: string]: JsonValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function seriesOf(name: string, v: JsonValue | undefined): Series | null {
  if (!isObject(v) || typeof v['unit'] !== 'string' || !Array.isArray(v['percentiles'])) return null;
  const raw: [number, number][] = [];
  for (const pair of v['percentiles'] as readonly JsonValue[]) {
    if (!Array.isArray(pair) || pair.length < 2) continue;
    const [p, value] = pair as readonly JsonValue[];
    if (typeof p === 'number' && typeof value === 'number' && Number.isFinite(p) && Number.isFinite(value) && p >= 0) raw.push([p, value]);
  }
  if (raw.length === 0) return null;
  const fractions = raw.every(([p]) => p <= 1);
  const points = raw.map(([p, value]) => [fractions ? p * 100 : Math.min(100, p), value] as const).sort((a, b) => a[0] - b[0]);
  return { name, unit: v['unit'], points };
}

/** Every percentile series of a line, in field order. */
export function seriesOfLine(line: ResultLine): Series[] {
  const out: Series[] = [];
  const top = seriesOf(line.scenario, line['histogram']);
  if (top) out.push(top);
  const named = line['histograms'];
  if (isObject(named)) for (const [k, v] of Object.entries(named)) out.push(...maybe(seriesOf(k, v)));
  const walk = (v: JsonValue, path: string[], depth: number): void => {
    if (depth > 4 || !isObject(v)) return;
    for (const [k, child] of Object.entries(v)) {
      const s = seriesOf([...path, k].join(' '), child);
      if (s) out.push(s);
      else walk(child, [...path, k], depth + 1);
    }
  };
  for (const [k, v] of Object.entries(line))
    if (!CONTRACT_FIELDS.has(k) && k !== 'histogram' && k !== 'histograms') walk({ [k]: v }, [], 0);
  return out;
}

function maybe<T>(v: T | null): T[] {
  return v === null ? [] : [v];
}

/** A workers-vs-inline figure: above 1 means workers ahead (the scenarios define it so). */
export interface WorkersVsInline {
  /** '' for the line's own figure, else the path of the object carrying it (e.g. "kinds hashFile"). */
  readonly where: string;
  readonly ratio: number;
}

/** `workersVsInline` numbers of a line, its own first, then nested ones (per kind, per transport). */
export function workersVsInlineOf(line: ResultLine): WorkersVsInline[] {
  const out: WorkersVsInline[] = [];
  const walk = (v: JsonValue, path: string[], depth: number): void => {
    if (depth > 4 || !isObject(v)) return;
    const r = v['workersVsInline'];
    if (typeof r === 'number' && Number.isFinite(r)) out.push({ where: path.join(' '), ratio: r });
    for (const [k, child] of Object.entries(v)) if (k !== 'workersVsInline') walk(child, [...path, k], depth + 1);
  };
  walk(line, [], 0);
  return out;
}

/** The line's `inline` figure when it is a number in the line's unit (ingest, fanout). */
export function inlineValueOf(line: ResultLine): number | null {
  const v = line['inline'];
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** Flattens JSON to [dotted key, value text] rows; percentile series become "(plotted)". */
export function flatten(v: JsonValue, prefix: string, out: [string, string][] = [], depth = 0): [string, string][] {
  if (isObject(v) && typeof v['unit'] === 'string' && Array.isArray(v['percentiles'])) {
    out.push([prefix, `percentiles in ${v['unit']} (plotted)`]);
  } else if (isObject(v) && depth < 6) {
    for (const [k, child] of Object.entries(v)) flatten(child, prefix === '' ? k : `${prefix}.${k}`, out, depth + 1);
  } else if (Array.isArray(v)) {
    out.push([prefix, v.map((x) => (typeof x === 'number' ? fmt(x) : typeof x === 'string' ? x : JSON.stringify(x))).join(', ')]);
  } else out.push([prefix, typeof v === 'number' ? fmt(v) : typeof v === 'string' ? v : JSON.stringify(v)]);
  return out;
}

/** The extras of a line as rows, without notes (shown as text) and the workers/inline pairs. */
export function extraRows(line: ResultLine): [string, string][] {
  const rows: [string, string][] = [];
  for (const [k, v] of Object.entries(line)) if (!CONTRACT_FIELDS.has(k) && k !== 'notes') flatten(v, k, rows);
  return rows;
}

/** Numeric leaves present under both `workers` and `inline`: [key, workers, inline]. */
export function workersInlinePairs(line: ResultLine): [string, number, number][] {
  const w = line['workers'];
  const i = line['inline'];
  if (!isObject(w) || !isObject(i)) return [];
  const leaves = (v: JsonValue): Map<string, number> => {
    const m = new Map<string, number>();
    for (const [k, text] of flatten(v, '')) {
      const n = Number(text.replace(/,/g, ''));
      if (text !== '' && Number.isFinite(n)) m.set(k, n);
    }
    return m;
  };
  const wl = leaves(w);
  const il = leaves(i);
  return [...wl].filter(([k]) => il.has(k)).map(([k, n]) => [k, n, il.get(k)!]);
}

export type Status = 'pass' | 'missed' | 'failed' | 'ran';

export function statusOf(line: ResultLine): Status {
  if (line.error !== undefined || line.problems !== undefined || line.value === null) return 'failed';
  if (line.target === null) return 'ran';
  return line.pass ? 'pass' : 'missed';
}

export const STATUS_TEXT: Record<Status, string> = { pass: 'PASS', missed: 'MISSED', failed: 'FAILED', ran: 'no target' };

export interface ParsedTarget {
  readonly kind: 'ratioAtLeast' | 'ratioAtMost' | 'valueAtMost' | 'valueAtLeast';
  readonly bound: number;
}

/** Reads back the harness's words ("ratio >= 0.8", "value <= 5"). */
export function parseTarget(target: string | null): ParsedTarget | null {
  const m = target === null ? null : /^(ratio|value)\s*(>=|<=)\s*(-?[\d.]+(?:e-?\d+)?)$/.exec(target.trim());
  if (!m) return null;
  const bound = Number(m[3]);
  if (!Number.isFinite(bound)) return null;
  if (m[1] === 'ratio') return { kind: m[2] === '>=' ? 'ratioAtLeast' : 'ratioAtMost', bound };
  return { kind: m[2] === '<=' ? 'valueAtMost' : 'valueAtLeast', bound };
}

/** The figure a target judges (ratio or value) and whether higher is better; null when neither. */
export function judgedFigure(line: ResultLine): { figure: number; higherIsBetter: boolean } | null {
  const t = parseTarget(line.target);
  if (t?.kind === 'ratioAtLeast' || t?.kind === 'ratioAtMost') {
    return line.ratio === null ? null : { figure: line.ratio, higherIsBetter: t.kind === 'ratioAtLeast' };
  }
  if (line.value === null) return null;
  if (t) return { figure: line.value, higherIsBetter: t.kind === 'valueAtLeast' };
  if (line.ratio !== null) return { figure: line.ratio, higherIsBetter: true };
  return null;
}
