/**
 * An inline SVG plot of HDR percentile series, value against percentile on a "nines" axis
 * (x = −log10(1 − p/100): 0 %, 90 %, 99 %, 99.9 % … evenly spaced, as HdrHistogram's own plots
 * do), so the tail is as wide as the body. The 100th percentile (the maximum) sits half a step
 * past the last nine. Earlier runs (`--compare`) are drawn dashed in their series' colour; a
 * `value <= N` target in the same unit is a horizontal rule. Every point has a <title> tooltip,
 * and the page puts the same numbers in a table beside the plot.
 */
import { esc, fmt, type Series } from './report-data.js';

/** Series colours (distinguishable in light and dark themes and for common colour blindness). */
export const PALETTE = ['#2f6fde', '#d9480f', '#2b8a3e', '#9c36b5', '#c2255c', '#0c8599', '#e67700', '#5c7cfa'];

const W = 640;
const H = 300;
const M = { left: 56, right: 16, top: 14, bottom: 44 };

function nines(p: number): number {
  return -Math.log10(1 - p / 100);
}

/** Round axis steps: 1, 2 or 5 × 10^k, about `count` of them up to `max`. */
export function niceTicks(max: number, count = 5): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => s >= raw) ?? 10 * mag;
  const ticks: number[] = [];
  for (let t = 0; t <= max + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  if (ticks[ticks.length - 1]! < max) ticks.push(Number((ticks[ticks.length - 1]! + step).toPrecision(12)));
  return ticks;
}

export interface PlotSeries {
  readonly series: Series;
  /** Index into PALETTE. */
  readonly colour: number;
  /** From the `--compare` run: dashed. */
  readonly before: boolean;
}

/** The SVG element; `label` is its accessible name. */
export function percentilePlot(label: string, plots: readonly PlotSeries[], targetAtMost: number | null): string {
  const unit = plots[0]?.series.unit ?? '';
  const finite = plots.flatMap((s) => s.series.points.filter(([p]) => p < 100).map(([p]) => nines(p)));
  const lastNine = Math.max(2, Math.ceil(Math.max(0, ...finite) - 1e-9));
  const hasMax = plots.some((s) => s.series.points.some(([p]) => p >= 100));
  const xEnd = lastNine + (hasMax ? 0.5 : 0);
  const xOf = (p: number): number => M.left + ((p >= 100 ? lastNine + 0.5 : nines(p)) / xEnd) * (W - M.left - M.right);
  const yMaxData = Math.max(0, ...plots.flatMap((s) => s.series.points.map(([, v]) => v)), targetAtMost ?? 0);
  const yTicks = niceTicks(yMaxData * 1.05);
  const yMax = yTicks[yTicks.length - 1]!;
  const yOf = (v: number): number => H - M.bottom - (v / yMax) * (H - M.top - M.bottom);
  const parts: string[] = [];
  for (const t of yTicks) {
    const y = yOf(t).toFixed(1);
    parts.push(`<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${y}" y2="${y}"/>`);
    parts.push(`<text class="tick" x="${M.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${esc(fmt(t))}</text>`);
  }
  const xTicks: [number, string][] = [[0, '0']];
  if (xEnd >= 1) xTicks.push([50, '50']);
  for (let k = 1; k <= lastNine; k++) xTicks.push([100 - 100 / 10 ** k, (100 - 100 / 10 ** k).toFixed(Math.max(0, k - 2))]);
  if (hasMax) xTicks.push([100, 'max']);
  for (const [p, text] of xTicks) {
    const x = xOf(p).toFixed(1);
    parts.push(`<line class="grid" x1="${x}" x2="${x}" y1="${M.top}" y2="${H - M.bottom}"/>`);
    parts.push(`<text class="tick" x="${x}" y="${H - M.bottom + 16}" text-anchor="middle">${esc(text)}</text>`);
  }
  parts.push(`<text class="axis" x="${(M.left + W - M.right) / 2}" y="${H - 6}" text-anchor="middle">percentile (%)</text>`);
  parts.push(
    `<text class="axis" transform="translate(14 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">${esc(unit)}</text>`,
  );
  if (targetAtMost !== null) {
    const y = yOf(targetAtMost).toFixed(1);
    parts.push(`<line class="target" x1="${M.left}" x2="${W - M.right}" y1="${y}" y2="${y}"/>`);
    parts.push(
      `<text class="target-label" x="${W - M.right - 4}" y="${Number(y) - 5}" text-anchor="end">target ≤ ${esc(fmt(targetAtMost))} ${esc(unit)}</text>`,
    );
  }
  for (const s of plots) {
    const colour = PALETTE[s.colour % PALETTE.length]!;
    const pts = s.series.points.map(([p, v]) => `${xOf(p).toFixed(1)},${yOf(v).toFixed(1)}`).join(' ');
    const dash = s.before ? ' stroke-dasharray="6 4"' : '';
    const who = `${s.series.name}${s.before ? ' (before)' : ''}`;
    parts.push(`<g class="series${s.before ? ' before' : ''}" data-series="${esc(who)}">`);
    parts.push(`<polyline fill="none" stroke="${colour}" stroke-width="2"${dash} points="${pts}"/>`);
    for (const [p, v] of s.series.points) {
      parts.push(
        `<circle cx="${xOf(p).toFixed(1)}" cy="${yOf(v).toFixed(1)}" r="${s.before ? 2 : 3}" fill="${colour}"><title>${esc(who)}: p${esc(p >= 100 ? 'max' : fmt(p))} = ${esc(fmt(v))} ${esc(s.series.unit)}</title></circle>`,
      );
    }
    parts.push('</g>');
  }
  return `<svg class="plot" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(label)}"><title>${esc(label)}</title>${parts.join('')}</svg>`;
}
