/**
 * The bench report: one self-contained HTML page (inline CSS and SVG, no script, a Content
 * Security Policy that forbids every fetch) from result lines. For each scenario: its status, the
 * value against its ceiling (or its target) as bars with the numbers beside them, the ratio against
 * its target, workers vs inline where the line reports it, HDR percentile plots, the extras; on
 * top a summary table and the machine and commit. With a compared run, its figures appear as
 * hatched "before" bars, dashed plot lines and a change column. Every string taken from a result
 * line is escaped; the lines themselves are embedded as JSON (`#bench-results`) so the page
 * carries its data.
 */
import { PALETTE, percentilePlot, type PlotSeries } from './percentile-plot.js';
import {
  esc,
  extraRows,
  fmt,
  inlineValueOf,
  judgedFigure,
  parseTarget,
  seriesOfLine,
  STATUS_TEXT,
  statusOf,
  workersInlinePairs,
  workersVsInlineOf,
  type Series,
} from './report-data.js';
import { REPORT_CSS } from './report-style.js';
import type { MachineInfo } from './machine.js';
import type { SavedRun } from './run-file.js';
import type { ResultLine } from '../types.js';

export interface ReportInput {
  readonly lines: readonly ResultLine[];
  /** Where the lines were measured; null when unknown. */
  readonly machine: Partial<MachineInfo> | null;
  /** Said under the machine table, e.g. that it is the machine rendering a saved run. */
  readonly machineNote?: string;
  /** Where the lines came from, e.g. "this run" or a file name. */
  readonly source: string;
  /** An earlier run to overlay (`--compare`). */
  readonly compare?: SavedRun | null;
  /** The command line, shown in the footer. */
  readonly command?: string;
  /** ISO time of rendering. */
  readonly generatedAt: string;
}

/** Hashes and JSON inside the page: `<` escaped so no `</script>` can end the data block. */
function jsonForScript(v: unknown): string {
  return JSON.stringify(v)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/** The anchor of the `index`th scenario section (a name may repeat: `npm run bench -- ring ring`). */
function slug(name: string, index: number): string {
  return `s${index}-${name.replace(/[^A-Za-z0-9_-]/g, (c) => `_${c.charCodeAt(0).toString(16)}`)}`;
}

function badge(line: ResultLine): string {
  const s = statusOf(line);
  return `<span class="badge ${s}">${STATUS_TEXT[s]}</span>`;
}

/** A change of the judged figure against the compared run, in words and an arrow. */
function change(line: ResultLine, old: ResultLine | undefined): string {
  if (!old) return '<span class="muted">not in the earlier run</span>';
  const now = judgedFigure(line);
  const before = judgedFigure(old);
  if (!now || !before || before.figure === 0) return `<span class="muted">${esc(fmt(old.value))} ${esc(old.unit)} before</span>`;
  const pct = ((now.figure - before.figure) / Math.abs(before.figure)) * 100;
  const better = now.higherIsBetter ? pct > 0 : pct < 0;
  const flat = Math.abs(pct) < 0.5;
  const cls = flat ? 'flat' : better ? 'better' : 'worse';
  const word = flat ? 'same' : better ? 'better' : 'worse';
  const arrow = flat ? '→' : pct > 0 ? '↑' : '↓';
  return `<span class="delta ${cls}">${arrow} ${esc(pct >= 0 ? '+' : '')}${esc(fmt(pct))}% (${word})</span>`;
}

interface Bar {
  readonly label: string;
  readonly value: number | null;
  readonly unit: string;
  readonly cls: string;
}

/** Horizontal bars on one scale with their numbers; `marker` is a vertical rule (a target). */
function bars(caption: string, rows: readonly Bar[], marker: { at: number; label: string } | null): string {
  const max = Math.max(0, ...rows.map((r) => r.value ?? 0), marker?.at ?? 0) * 1.08 || 1;
  const pct = (v: number): string => `${Math.max(0, Math.min(100, (v / max) * 100)).toFixed(2)}%`;
  const body = rows
    .map((r) => {
      const fill = r.value === null ? '' : `<span class="fill ${esc(r.cls)}" style="width:${pct(r.value)}"></span>`;
      const mark = marker ? `<span class="marker" style="left:${pct(marker.at)}" title="${esc(marker.label)}"></span>` : '';
      return `<div class="bar-row ${esc(r.cls)}"><span class="bar-label">${esc(r.label)}</span><span class="track" aria-hidden="true">${fill}${mark}</span><span class="bar-value">${esc(fmt(r.value))} ${esc(r.unit)}</span></div>`;
    })
    .join('');
  const legend = marker ? `<p class="marker-legend"><span class="marker-key" aria-hidden="true"></span> ${esc(marker.label)}</p>` : '';
  return `<figure class="bars"><figcaption>${esc(caption)}</figcaption>${body}${legend}</figure>`;
}

function valueBars(line: ResultLine, old: ResultLine | undefined): string {
  const t = parseTarget(line.target);
  const rows: Bar[] = [{ label: 'value', value: line.value, unit: line.unit, cls: 'now' }];
  if (old) rows.push({ label: 'value (before)', value: old.value, unit: old.unit, cls: 'before' });
  const inline = inlineValueOf(line);
  if (inline !== null) rows.push({ label: 'inline (SVC_ACTORS=inline)', value: inline, unit: line.unit, cls: 'inline' });
  if (line.ceiling !== null || (old && old.ceiling !== null)) {
    rows.push({ label: 'ceiling', value: line.ceiling, unit: line.unit, cls: 'ceiling' });
    if (old) rows.push({ label: 'ceiling (before)', value: old.ceiling, unit: old.unit, cls: 'before ceiling' });
  }
  const marker =
    t && t.kind !== 'ratioAtLeast' && t.kind !== 'ratioAtMost' ? { at: t.bound, label: `target ${line.target ?? ''} ${line.unit}` } : null;
  return bars(line.ceiling !== null ? 'value against its ceiling (same run)' : 'value', rows, marker);
}

function ratioBars(line: ResultLine, old: ResultLine | undefined): string {
  const t = parseTarget(line.target);
  if (line.ratio === null && !(old && old.ratio !== null)) return '';
  const rows: Bar[] = [{ label: 'ratio', value: line.ratio, unit: '× ceiling', cls: 'now' }];
  if (old) rows.push({ label: 'ratio (before)', value: old.ratio, unit: '× ceiling', cls: 'before' });
  const marker =
    t?.kind === 'ratioAtLeast' || t?.kind === 'ratioAtMost'
      ? { at: t.bound, label: `target: ratio ${t.kind === 'ratioAtLeast' ? '≥' : '≤'} ${fmt(t.bound)}` }
      : null;
  return bars('ratio = value ÷ ceiling', rows, marker);
}

function workersSection(line: ResultLine): string {
  const figures = workersVsInlineOf(line);
  const pairs = workersInlinePairs(line);
  const inlineFields = Object.entries(line).filter(([k, v]) => /^inline[A-Z]/.test(k) && typeof v === 'number');
  if (figures.length === 0 && pairs.length === 0 && inlineFields.length === 0) return '';
  const parts: string[] = ['<section class="wvi"><h4>Workers vs inline</h4>'];
  if (figures.length > 0) {
    parts.push(
      bars(
        'workers ÷ inline (above 1: workers ahead)',
        figures.map((f) => ({
          label: f.where === '' ? 'workersVsInline' : f.where,
          value: f.ratio,
          unit: '×',
          cls: f.ratio >= 1 ? 'ahead' : 'behind',
        })),
        { at: 1, label: 'even (1.0)' },
      ),
    );
  }
  if (inlineFields.length > 0)
    parts.push(
      `<p class="inline-fields">${inlineFields.map(([k, v]) => `<span><code>${esc(k)}</code> ${esc(fmt(v as number))}</span>`).join(' ')}</p>`,
    );
  if (pairs.length > 0) {
    parts.push(
      '<details><summary>workers and inline side by side</summary><table class="pairs"><thead><tr><th scope="col">figure</th><th scope="col">workers</th><th scope="col">inline</th></tr></thead><tbody>',
    );
    for (const [k, w, i] of pairs)
      parts.push(`<tr><th scope="row"><code>${esc(k)}</code></th><td>${esc(fmt(w))}</td><td>${esc(fmt(i))}</td></tr>`);
    parts.push('</tbody></table></details>');
  }
  parts.push('</section>');
  return parts.join('');
}

function plotsSection(line: ResultLine, old: ResultLine | undefined): string {
  const now = seriesOfLine(line);
  const before = old ? seriesOfLine(old) : [];
  if (now.length === 0 && before.length === 0) return '';
  const units = [...new Set([...now, ...before].map((s) => s.unit))];
  const t = parseTarget(line.target);
  const out: string[] = ['<section class="plots"><h4>Latency percentiles (HDR histogram)</h4>'];
  for (const unit of units) {
    const names = [...new Set([...now, ...before].filter((s) => s.unit === unit).map((s) => s.name))];
    const plots: PlotSeries[] = [];
    const legend: string[] = [];
    names.forEach((name, i) => {
      const n = now.find((s) => s.name === name && s.unit === unit);
      const b = before.find((s) => s.name === name && s.unit === unit);
      if (b) plots.push({ series: b, colour: i, before: true });
      if (n) plots.push({ series: n, colour: i, before: false });
      const swatch = `<span class="swatch" style="background:${PALETTE[i % PALETTE.length]!}" aria-hidden="true"></span>`;
      legend.push(
        `<li>${swatch}${esc(name)}${n ? '' : ' (earlier run only)'}${b ? ' <span class="muted">— dashed: before</span>' : ''}</li>`,
      );
    });
    const target = t?.kind === 'valueAtMost' && unit === line.unit ? t.bound : null;
    out.push(`<figure class="plot-figure">${percentilePlot(`${line.scenario}: ${unit} by percentile`, plots, target)}`);
    out.push(`<figcaption><ul class="legend">${legend.join('')}</ul></figcaption></figure>`);
    out.push(percentileTable(unit, names, now, before));
  }
  out.push('</section>');
  return out.join('');
}

function percentileTable(unit: string, names: readonly string[], now: readonly Series[], before: readonly Series[]): string {
  const cols: { head: string; s: Series | undefined }[] = [];
  for (const name of names) {
    cols.push({ head: name, s: now.find((x) => x.name === name && x.unit === unit) });
    const b = before.find((x) => x.name === name && x.unit === unit);
    if (b) cols.push({ head: `${name} (before)`, s: b });
  }
  const ps = [...new Set(cols.flatMap((c) => c.s?.points.map(([p]) => p) ?? []))].sort((a, b) => a - b);
  const head = cols.map((c) => `<th scope="col">${esc(c.head)}</th>`).join('');
  const rows = ps
    .map((p) => {
      const cells = cols.map((c) => `<td>${esc(fmt(c.s?.points.find(([q]) => q === p)?.[1]))}</td>`).join('');
      return `<tr><th scope="row">${p >= 100 ? 'max' : `p${esc(fmt(p))}`}</th>${cells}</tr>`;
    })
    .join('');
  return `<details><summary>percentiles as numbers (${esc(unit)})</summary><table class="percentiles"><thead><tr><th scope="col">percentile</th>${head}</tr></thead><tbody>${rows}</tbody></table></details>`;
}

function scenarioSection(line: ResultLine, index: number, old: ResultLine | undefined): string {
  const parts: string[] = [`<section class="scenario" id="${slug(line.scenario, index)}" data-scenario="${esc(line.scenario)}">`];
  parts.push(`<h3>${esc(line.scenario)} ${badge(line)}</h3>`);
  const facts = [
    `value <strong>${esc(fmt(line.value))} ${esc(line.unit)}</strong>`,
    line.ceiling !== null ? `ceiling ${esc(fmt(line.ceiling))} ${esc(line.unit)}` : 'no ceiling',
    line.ratio !== null ? `ratio <strong>${esc(fmt(line.ratio))}</strong>` : '',
    line.target !== null ? `target ${esc(line.target)}` : 'no target',
    typeof line.seconds === 'number' ? `took ${esc(fmt(line.seconds))} s` : '',
  ].filter((x) => x !== '');
  parts.push(`<p class="facts">${facts.join(' · ')}</p>`);
  if (typeof line.error === 'string') parts.push(`<p class="error" role="alert">Error: ${esc(line.error)}</p>`);
  if (Array.isArray(line.problems))
    parts.push(`<div class="error" role="alert">Problems:<ul>${line.problems.map((p) => `<li>${esc(p)}</li>`).join('')}</ul></div>`);
  parts.push('<div class="charts">', valueBars(line, old), ratioBars(line, old), '</div>');
  if (old)
    parts.push(
      `<p class="compare-note">Before (${esc(fmt(old.value))} ${esc(old.unit)}, ratio ${esc(fmt(old.ratio))}): ${change(line, old)}</p>`,
    );
  parts.push(workersSection(line), plotsSection(line, old));
  if (typeof line.notes === 'string') parts.push(`<p class="notes">${esc(line.notes)}</p>`);
  const rows = extraRows(line);
  if (rows.length > 0) {
    parts.push(`<details class="extras"><summary>all ${rows.length} extra figures</summary><table><tbody>`);
    for (const [k, v] of rows) parts.push(`<tr><th scope="row"><code>${esc(k)}</code></th><td>${esc(v)}</td></tr>`);
    parts.push('</tbody></table></details>');
  }
  parts.push('</section>');
  return parts.join('');
}

function summaryTable(lines: readonly ResultLine[], compare: SavedRun | null | undefined): string {
  const oldOf = (name: string): ResultLine | undefined => compare?.lines.find((l) => l.scenario === name);
  const head = ['scenario', 'value', 'ceiling', 'ratio', 'target', 'result', 'workers ÷ inline', ...(compare ? ['before', 'change'] : [])];
  const rows = lines.map((l, index) => {
    const wvi = workersVsInlineOf(l).find((f) => f.where === '');
    const old = oldOf(l.scenario);
    const cells = [
      `<th scope="row"><a href="#${slug(l.scenario, index)}">${esc(l.scenario)}</a></th>`,
      `<td class="num">${esc(fmt(l.value))} ${esc(l.unit)}</td>`,
      `<td class="num">${l.ceiling === null ? '—' : `${esc(fmt(l.ceiling))} ${esc(l.unit)}`}</td>`,
      `<td class="num">${esc(fmt(l.ratio))}</td>`,
      `<td>${esc(l.target ?? '—')}</td>`,
      `<td>${badge(l)}</td>`,
      `<td class="num">${wvi ? esc(fmt(wvi.ratio)) : '—'}</td>`,
    ];
    if (compare) {
      cells.push(
        `<td class="num">${old ? `${esc(fmt(old.value))} ${esc(old.unit)}${old.ratio !== null ? ` (ratio ${esc(fmt(old.ratio))})` : ''}` : '—'}</td>`,
      );
      cells.push(`<td>${change(l, old)}</td>`);
    }
    return `<tr data-scenario="${esc(l.scenario)}">${cells.join('')}</tr>`;
  });
  const gone = compare ? compare.lines.filter((o) => !lines.some((l) => l.scenario === o.scenario)) : [];
  for (const o of gone) {
    rows.push(
      `<tr class="gone"><th scope="row">${esc(o.scenario)}</th><td colspan="6" class="muted">only in the earlier run</td><td class="num">${esc(fmt(o.value))} ${esc(o.unit)}</td><td></td></tr>`,
    );
  }
  const counts = { pass: 0, missed: 0, failed: 0, ran: 0 };
  for (const l of lines) counts[statusOf(l)]++;
  const caption = `${lines.length} scenarios: ${counts.pass} passed, ${counts.missed} missed their target, ${counts.failed} failed, ${counts.ran} without target`;
  return `<table class="summary"><caption>${esc(caption)}</caption><thead><tr>${head.map((h) => `<th scope="col">${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function machineTable(m: Partial<MachineInfo> | null, note: string | undefined): string {
  if (!m) return `<p class="muted">The machine was not recorded${note ? `: ${esc(note)}` : '.'}</p>`;
  const commit = m.commit
    ? `<code title="${esc(m.commit)}">${esc(m.commit.slice(0, 12))}</code>${m.dirty ? ' (with uncommitted changes)' : ''}${m.commitSubject ? ` — ${esc(m.commitSubject)}` : ''}`
    : 'unknown';
  const rows: [string, string][] = [
    ['commit', commit],
    ['CPU', `${esc(m.cpuModel ?? 'unknown')} × ${esc(m.cores ?? '?')} cores`],
    ['memory', m.memoryMiB === undefined ? 'unknown' : `${esc(fmt(m.memoryMiB))} MiB (${esc(fmt(m.freeMemoryMiB))} MiB free)`],
    ['load average', m.loadAverage ? `${esc(m.loadAverage.map((l) => fmt(l)).join(' / '))} (1 / 5 / 15 min, at the start)` : 'unknown'],
    [
      'accelerator',
      m.accelerator ? `<strong>${esc(m.accelerator)}</strong>${m.acceleratorReason ? ` — ${esc(m.acceleratorReason)}` : ''}` : 'unknown',
    ],
    ['Node.js', esc(m.node ?? 'unknown')],
    ['OS', esc(m.os ?? 'unknown')],
    ['measured at', esc(m.takenAt ?? 'unknown')],
  ];
  const dl = rows.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join('');
  return `<dl class="machine">${dl}</dl>${note ? `<p class="muted">${esc(note)}</p>` : ''}`;
}

/** The whole page. */
export function renderReport(input: ReportInput): string {
  const { lines, compare } = input;
  const m = input.machine;
  const short = m?.commit ? m.commit.slice(0, 12) : null;
  const title = `sandboxd bench${short ? ` at ${short}` : ''} — ${input.generatedAt.slice(0, 16).replace('T', ' ')} UTC`;
  const oldOf = (name: string): ResultLine | undefined => compare?.lines.find((l) => l.scenario === name);
  const csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";
  const compareBlock = compare
    ? `<section class="compare" id="compare"><h2>Compared with an earlier run</h2><p>Earlier run: <code>${esc(compare.source)}</code> (${compare.lines.length} scenarios), drawn as hatched bars, dashed plot lines and the “before” columns.</p>${compare.machine ? machineTable(compare.machine, undefined) : '<p class="muted">The earlier run does not record its machine.</p>'}</section>`
    : '';
  const data = jsonForScript({
    source: input.source,
    machine: m,
    lines,
    compare: compare ? { source: compare.source, machine: compare.machine, lines: compare.lines } : null,
  });
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${esc(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="sandboxd native-bench">
<title>${esc(title)}</title>
<style>${REPORT_CSS}</style>
</head>
<body>
<header><h1>sandboxd bench report</h1><p class="sub">${esc(lines.length)} scenarios from ${esc(input.source)} · rendered ${esc(input.generatedAt)}</p></header>
<main>
<section id="summary"><h2>Summary</h2>${summaryTable(lines, compare)}
<p class="muted">Each ceiling is measured in the same run as its value, so ratios compare across machines; absolute figures drift on shared cores.</p></section>
<section id="machine"><h2>Machine</h2>${machineTable(m, input.machineNote)}</section>
${compareBlock}
<section id="scenarios"><h2>Scenarios</h2>${lines.map((l, i) => scenarioSection(l, i, oldOf(l.scenario))).join('\n')}</section>
</main>
<footer><p>Generated by <code>${esc(input.command ?? 'native-bench')}</code>. The result lines are embedded in this page as JSON (element <code>#bench-results</code>).</p></footer>
<script type="application/json" id="bench-results">${data}</script>
</body>
</html>
`;
}
