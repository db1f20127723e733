/** The report page's stylesheet (inline: the page loads nothing). Light and dark themes, print-friendly. */
export const REPORT_CSS = `
:root{--bg:#fff;--fg:#1b1f24;--muted:#5b6470;--line:#d6dbe1;--card:#f6f8fa;--now:#2f6fde;--ceiling:#8993a0;--inline:#9c36b5;
--before:#2f6fde;--pass:#1f7a35;--missed:#b35900;--failed:#c62828;--ran:#5b6470;--target:#c62828;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#14171b;--fg:#e6e9ed;--muted:#a0a9b4;--line:#333a43;--card:#1c2026;--now:#5b95f5;
--ceiling:#7d8794;--inline:#c77dde;--before:#5b95f5;--pass:#4cc26b;--missed:#f0a04b;--failed:#ff6b6b;--ran:#a0a9b4;--target:#ff6b6b}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header,main,footer{max-width:1100px;margin:0 auto;padding:0 20px}
header{padding-top:20px}
h1{font-size:1.6rem;margin:0 0 4px}
h2{font-size:1.25rem;margin:28px 0 10px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:1.15rem;margin:0 0 6px;display:flex;align-items:center;gap:10px}
h4{font-size:1rem;margin:16px 0 6px}
code{font:0.9em ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.sub,.muted{color:var(--muted)}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
caption{text-align:left;color:var(--muted);padding:4px 0}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
thead th{font-weight:600;border-bottom:2px solid var(--line)}
td.num{text-align:right;white-space:nowrap}
.summary a{color:inherit}
.badge{display:inline-block;font-size:0.75rem;font-weight:700;letter-spacing:0.03em;padding:1px 8px;border-radius:10px;color:#fff;white-space:nowrap}
.badge.pass{background:var(--pass)}.badge.missed{background:var(--missed)}.badge.failed{background:var(--failed)}.badge.ran{background:var(--ran)}
.delta.better{color:var(--pass)}.delta.worse{color:var(--failed)}.delta.flat{color:var(--muted)}
dl.machine{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:0}
dl.machine dt{color:var(--muted)}dl.machine dd{margin:0}
.scenario{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:16px;margin:16px 0}
.facts{margin:0 0 8px}
.error{color:var(--failed);font-weight:600}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:12px 28px}
figure{margin:0}
figcaption{color:var(--muted);font-size:0.9rem;margin-bottom:4px}
.bar-row{display:grid;grid-template-columns:11.5rem 1fr 8rem;align-items:center;gap:8px;margin:3px 0;font-size:0.9rem}
.bar-value{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.track{position:relative;height:16px;background:color-mix(in srgb,var(--line) 45%,transparent);border-radius:3px}
.fill{position:absolute;left:0;top:0;bottom:0;border-radius:3px;background:var(--now)}
.fill.ceiling{background:var(--ceiling)}.fill.inline{background:var(--inline)}
.fill.ahead{background:var(--pass)}.fill.behind{background:var(--missed)}
.fill.before{background:repeating-linear-gradient(135deg,var(--before) 0 4px,transparent 4px 8px);border:1px solid var(--before);opacity:0.75}
.fill.before.ceiling{background:repeating-linear-gradient(135deg,var(--ceiling) 0 4px,transparent 4px 8px);border-color:var(--ceiling)}
.bar-row.before{font-style:italic;color:var(--muted)}
.marker{position:absolute;top:-3px;bottom:-3px;width:0;border-left:2px dashed var(--target)}
.marker-legend{font-size:0.85rem;color:var(--muted);margin:2px 0 0}
.marker-key{display:inline-block;width:0;height:12px;border-left:2px dashed var(--target);vertical-align:middle;margin:0 4px}
.compare-note{margin:8px 0 0}
.inline-fields span{margin-right:14px;white-space:nowrap}
.plot-figure{max-width:680px}
svg.plot{width:100%;height:auto;display:block}
svg.plot .grid{stroke:var(--line);stroke-width:1}
svg.plot .tick,svg.plot .axis,svg.plot .target-label{fill:var(--muted);font-size:11px}
svg.plot .axis{font-size:12px}
svg.plot .target{stroke:var(--target);stroke-width:1.5;stroke-dasharray:4 3}
svg.plot .target-label{fill:var(--target)}
ul.legend{list-style:none;padding:0;margin:4px 0;display:flex;flex-wrap:wrap;gap:4px 16px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;vertical-align:middle}
details{margin:8px 0}
summary{cursor:pointer;color:var(--muted)}
details table{margin-top:6px;font-size:0.88rem}
.notes{color:var(--muted);font-size:0.9rem}
footer{padding-bottom:30px;color:var(--muted);font-size:0.85rem}
@media print{.scenario{break-inside:avoid}details{display:block}}
`;
