/**
 * Where a thread's time went in a .cpuprofile (node --cpu-prof), optionally only inside given
 * windows of CLOCK_MONOTONIC µs (the profiles' clock): the ingest scenario prints its phases'
 * windows under --cpu-prof (`[bench] ingest: phase workers 0 <from>-<to> us`), so one profiled
 * run can be cut into its workers, raw and inline phases.
 *
 *   node dist/native-bench/profile-slice.js PROFILE [--log STDERR_FILE --phase PREFIX] [--top N]
 *
 * Prints the time in the windows, the share of idle, GC and program samples, and the functions
 * with the most self time (ms and share of the non-idle time).
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

function args(argv: string[]): { file: string; log?: string; phase?: string; top: number } {
  const out: { file: string; log?: string; phase?: string; top: number } = { file: '', top: 25 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--log') out.log = argv[++i]!;
    else if (a === '--phase') out.phase = argv[++i]!;
    else if (a === '--top') out.top = Number(argv[++i]);
    else out.file = a;
  }
  if (out.file === '') {
    process.stderr.write('usage: profile-slice PROFILE [--log STDERR_FILE --phase PREFIX] [--top N]\n');
    process.exit(2);
  }
  return out;
}

function windows(log: string, prefix: string): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const m of readFileSync(log, 'utf8').matchAll(/phase (\S+ \d+) (\d+)-(\d+) us/g))
    if (m[1]!.startsWith(prefix)) out.push([Number(m[2]), Number(m[3])]);
  return out;
}

const opt = args(process.argv.slice(2));
const p = JSON.parse(readFileSync(opt.file, 'utf8')) as CpuProfile;
const spans =
  opt.log !== undefined && opt.phase !== undefined ? windows(opt.log, opt.phase) : [[p.startTime, p.endTime] as [number, number]];
const inside = (t: number): boolean => spans.some(([a, b]) => t >= a && t < b);
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const selfUs = new Map<number, number>();
let t = p.startTime;
let totalUs = 0;
for (let i = 0; i < p.samples.length; i++) {
  // A sample's delta is the time since the previous one: charge it to this sample.
  const d = p.timeDeltas[i] ?? 0;
  t += d;
  if (!inside(t)) continue;
  totalUs += d;
  selfUs.set(p.samples[i]!, (selfUs.get(p.samples[i]!) ?? 0) + d);
}
const byName = new Map<string, number>();
let idle = 0;
let gc = 0;
for (const [id, us] of selfUs) {
  const f = byId.get(id)!.callFrame;
  if (f.functionName === '(idle)') idle += us;
  else if (f.functionName === '(garbage collector)') gc += us;
  const name = `${f.functionName || '(anonymous)'} ${f.url === '' ? '' : `${basename(f.url)}:${f.lineNumber + 1}`}`.trim();
  byName.set(name, (byName.get(name) ?? 0) + us);
}
const busy = totalUs - idle;
const ms = (us: number): string => (us / 1000).toFixed(1);
const pct = (us: number, of: number): string => `${((100 * us) / Math.max(1, of)).toFixed(1)} %`;
process.stdout.write(
  `${basename(opt.file)}${opt.phase === undefined ? '' : ` phase ${opt.phase} (${spans.length} windows)`}: ${ms(totalUs)} ms, ` +
    `busy ${ms(busy)} ms (${pct(busy, totalUs)}), GC ${ms(gc)} ms (${pct(gc, busy)} of busy)\n`,
);
for (const [name, us] of [...byName]
  .filter(([n]) => !n.startsWith('(idle)'))
  .sort((a, b) => b[1] - a[1])
  .slice(0, opt.top))
  process.stdout.write(`${ms(us).padStart(9)} ms ${pct(us, busy).padStart(7)}  ${name}\n`);
