/**
 * The bench harness: argument parsing, the time bound, and the one-JSON-line-per-scenario
 * contract (README.md, "Result line"). run.ts is the command-line entry; tests drive runBench
 * with their own scenarios and streams.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { machineInfo, machineRecord, type MachineInfo } from './report/machine.js';
import { renderReport } from './report/report-html.js';
import { readRun, type SavedRun } from './report/run-file.js';
import type { BenchResult, BenchScenario, BenchTarget, ResultLine } from './types.js';

export type { ResultLine } from './types.js';

/** Measuring time per scenario when --seconds is not given, seconds. */
export const DEFAULT_SECONDS = 5;
/** Added to 3 × seconds to make a scenario's hard limit, ms. */
export const DEFAULT_GRACE_MS = 10_000;
/** Exit codes: all ran; a scenario failed (threw, timed out, problems; with --strict also a missed target); bad usage; Ctrl-C. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;
export const EXIT_INTERRUPTED = 130;

/** A scenario's hard limit: 3 × its measuring time + grace, ms. */
export function hardLimitMs(seconds: number, graceMs = DEFAULT_GRACE_MS): number {
  return Math.ceil(3 * seconds * 1000 + graceMs);
}

/** True when the line records a failure (not merely a missed target). */
export function isFailure(line: ResultLine): boolean {
  return line.error !== undefined || line.problems !== undefined;
}

function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function describeTarget(t: BenchTarget): string {
  if ('ratioAtLeast' in t) return `ratio >= ${t.ratioAtLeast}`;
  if ('ratioAtMost' in t) return `ratio <= ${t.ratioAtMost}`;
  if ('valueAtMost' in t) return `value <= ${t.valueAtMost}`;
  return `value >= ${t.valueAtLeast}`;
}

function meetsTarget(t: BenchTarget, value: number, ratio: number | null): boolean {
  if ('ratioAtLeast' in t) return ratio !== null && ratio >= t.ratioAtLeast;
  if ('ratioAtMost' in t) return ratio !== null && ratio <= t.ratioAtMost;
  if ('valueAtMost' in t) return value <= t.valueAtMost;
  return value >= t.valueAtLeast;
}

function resultLine(s: BenchScenario, r: BenchResult, elapsedMs: number): ResultLine {
  if (!Number.isFinite(r.value)) throw new TypeError(`value ${r.value} is not a finite number`);
  if (r.ceiling !== null && !(Number.isFinite(r.ceiling) && r.ceiling > 0))
    throw new TypeError(`ceiling ${r.ceiling} is not a positive number`);
  const ratio = r.ceiling === null ? null : r.value / r.ceiling;
  const problems = r.problems ?? [];
  const line: ResultLine = {
    scenario: s.name,
    value: round(r.value),
    unit: s.unit,
    ceiling: r.ceiling === null ? null : round(r.ceiling),
    ratio: ratio === null ? null : round(ratio, 3),
    target: s.target ? describeTarget(s.target) : null,
    pass: problems.length === 0 && (s.target ? meetsTarget(s.target, r.value, ratio) : true),
  };
  // contract fields win over an extra of the same name
  for (const [k, v] of Object.entries(r.extra ?? {})) if (!(k in line)) line[k] = v;
  if (problems.length > 0) line.problems = [...problems];
  line.seconds = round(elapsedMs / 1000);
  return line;
}

/** The line of a scenario that did not produce a result. */
export function failureLine(s: Pick<BenchScenario, 'name' | 'unit' | 'target'>, error: string, elapsedMs: number): ResultLine {
  return {
    scenario: s.name,
    value: null,
    unit: s.unit,
    ceiling: null,
    ratio: null,
    target: s.target ? describeTarget(s.target) : null,
    pass: false,
    error,
    seconds: round(elapsedMs / 1000),
  };
}

/**
 * Runs one scenario in this process and resolves with its result line; never rejects. After
 * `hardLimitMs(seconds, graceMs)` the scenario's signal is aborted and the line reports the
 * timeout (a scenario that ignores the signal is abandoned; the CLI exits regardless).
 */
export async function runScenario(
  s: BenchScenario,
  opts: { seconds: number; graceMs?: number; signal?: AbortSignal },
): Promise<ResultLine> {
  const limitMs = hardLimitMs(opts.seconds, opts.graceMs);
  const ac = new AbortController();
  const started = performance.now();
  const onOuterAbort = (): void => ac.abort(new Error('interrupted'));
  opts.signal?.addEventListener('abort', onOuterAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  // Not unref'd on purpose: if the scenario leaves nothing else pending, this timer is what
  // keeps the process alive long enough to report the timeout instead of exiting silently.
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new Error(
        `timed out after ${limitMs} ms (hard limit 3 × ${opts.seconds} s + ${(opts.graceMs ?? DEFAULT_GRACE_MS) / 1000} s)`,
      );
      ac.abort(err);
      reject(err);
    }, limitMs);
  });
  const aborted = new Promise<never>((_, reject) => {
    ac.signal.addEventListener('abort', () => reject(ac.signal.reason as Error), { once: true });
  });
  try {
    if (opts.signal?.aborted === true) onOuterAbort();
    const run = Promise.resolve().then(() => s.run({ seconds: opts.seconds, signal: ac.signal }));
    const result = await Promise.race([run, limit, aborted]);
    return resultLine(s, result, performance.now() - started);
  } catch (err) {
    return failureLine(s, err instanceof Error ? err.message : String(err), performance.now() - started);
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onOuterAbort);
    if (!ac.signal.aborted) ac.abort(new Error('scenario finished'));
  }
}

/**
 * Runs one scenario in a child process (`node <script> NAME --seconds N --in-process`, with this
 * process's execArgv, so `node --cpu-prof run.js` profiles each scenario) and resolves with the
 * line it printed. Never rejects.
 *
 * The child leads a process group of its own, so everything a scenario starts (sandbox-agents,
 * client processes, libvirtd, QEMU) can be stopped with it: `signal` aborted sends the group SIGINT
 * (the scenario's own clean-up runs, as with Ctrl-C in a terminal), and SIGKILL follows 5 s later;
 * a child past its hard limit + 5 s gets SIGKILL; and when the child has exited, whatever it left
 * behind in its group is killed. (A daemon that called setsid() has left the group: a scenario
 * that starts one stops it itself.)
 */
export function runIsolated(script: string, s: BenchScenario, seconds: number, signal?: AbortSignal): Promise<ResultLine> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...process.execArgv, script, s.name, '--seconds', String(seconds), '--in-process'], {
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    });
    const killGroup = (sig: NodeJS.Signals): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // ESRCH: the group is empty
      }
    };
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    const killer = setTimeout(() => killGroup('SIGKILL'), hardLimitMs(seconds) + 5000);
    let lastResort: NodeJS.Timeout | undefined;
    const onAbort = (): void => {
      killGroup('SIGINT');
      lastResort = setTimeout(() => killGroup('SIGKILL'), 5000);
    };
    if (signal?.aborted === true) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    const finish = (why: string): void => {
      clearTimeout(killer);
      clearTimeout(lastResort);
      signal?.removeEventListener('abort', onAbort);
      killGroup('SIGKILL');
      const last = out.trim().split('\n').at(-1) ?? '';
      try {
        const line = JSON.parse(last) as ResultLine;
        if (line.scenario === s.name) return resolve(line);
      } catch {
        // no JSON line: reported below
      }
      resolve(failureLine(s, `child process printed no result line (${why})`, performance.now() - started));
    };
    // a process left in the group may hold stdout open: without this 'close' would wait for it
    child.on('exit', () => killGroup('SIGKILL'));
    child.on('error', (err) => finish(err.message));
    child.on('close', (code, sig) => finish(sig !== null ? `killed by ${sig}` : `exit code ${code}`));
  });
}

export interface BenchArgs {
  names: string[];
  seconds: number;
  list: boolean;
  help: boolean;
  strict: boolean;
  inProcess: boolean;
  /** Write the HTML report here (`--html FILE`). */
  html: string | null;
  /** Render the report from this saved run instead of running (`--from FILE`, needs --html). */
  from: string | null;
  /** Overlay this earlier run on the report (`--compare FILE`, needs --html). */
  compare: string | null;
  /** Print the `{"machine":…}` record and exit (`--machine`). */
  machine: boolean;
}

/** Parses the command line; returns a message for bad usage. */
export function parseBenchArgs(argv: readonly string[]): BenchArgs | string {
  const args: BenchArgs = {
    names: [],
    seconds: DEFAULT_SECONDS,
    list: false,
    help: false,
    strict: false,
    inProcess: false,
    html: null,
    from: null,
    compare: null,
    machine: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const file = FILE_OPTIONS.find((o) => a === `--${o}` || a.startsWith(`--${o}=`));
    if (file !== undefined) {
      const text = a === `--${file}` ? argv[++i] : a.slice(file.length + 3);
      if (text === undefined || text === '' || (a === `--${file}` && text.startsWith('-'))) return `--${file} needs a file name`;
      args[file] = text;
    } else if (a === '--machine') args.machine = true;
    else if (a === '--list') args.list = true;
    else if (a === '--help' || a === '-h') args.help = true;
    else if (a === '--strict') args.strict = true;
    else if (a === '--in-process') args.inProcess = true;
    else if (a === '--seconds' || a.startsWith('--seconds=')) {
      const text = a === '--seconds' ? argv[++i] : a.slice('--seconds='.length);
      const n = Number(text);
      if (text === undefined || text === '' || !Number.isFinite(n) || n <= 0 || n > 3600)
        return `--seconds needs a number of seconds in (0, 3600], got ${text ?? 'nothing'}`;
      args.seconds = n;
    } else if (a.startsWith('-')) return `unknown option ${a}`;
    else args.names.push(a);
  }
  if ((args.from !== null || args.compare !== null) && args.html === null)
    return `--${args.from !== null ? 'from' : 'compare'} needs --html FILE`;
  return args;
}

const FILE_OPTIONS = ['html', 'from', 'compare'] as const;

export const USAGE = `usage: npm run bench -- [NAME ...] [--seconds N] [--strict] [--in-process] [--html FILE [--compare OLD.ndjson]]
       npm run bench -- --html FILE --from RUN.ndjson [--compare OLD.ndjson] [NAME ...]
       npm run bench -- --list | --machine
  NAME          scenarios to run (default: all); one JSON result line each on stdout
  --seconds N   measuring time per scenario, seconds (default ${DEFAULT_SECONDS}); hard limit 3 × N + ${DEFAULT_GRACE_MS / 1000} s
  --strict      a missed target also fails the run (exit 1)
  --in-process  run several scenarios in this process instead of one child process each
  --html FILE   also write the report: one self-contained HTML page (bars, ratios, percentile plots, machine)
  --from FILE   render the report from saved result lines (npm run --silent bench > FILE) without running
  --compare OLD overlay an earlier run's saved result lines on the report
  --machine     print this machine and commit as one {"machine":…} line (prepend it to a saved run)
  --list        list the scenarios and their targets`;

function listText(scenarios: readonly BenchScenario[]): string {
  const width = Math.max(...scenarios.map((s) => s.name.length));
  return scenarios
    .map((s) => `${s.name.padEnd(width)}  ${s.description} [${s.unit}${s.target ? `; target ${describeTarget(s.target)}` : ''}]\n`)
    .join('');
}

/** What runBench needs from its surroundings. */
export interface BenchDeps {
  scenarios: readonly BenchScenario[];
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** Aborts the scenario running now and skips the rest (Ctrl-C). */
  signal?: AbortSignal;
  /** Grace added to 3 × seconds for the hard limit, ms (tests shorten it). */
  graceMs?: number;
  /** Runs one scenario in a child process; used when several are selected, unless --in-process. */
  isolate?: (s: BenchScenario, seconds: number) => Promise<ResultLine>;
  /** Describes the machine for the report and --machine (default: machineInfo()). */
  machine?: () => MachineInfo;
}

/** The bench command: resolves with the process exit code (EXIT_*). */
export async function runBench(argv: readonly string[], deps: BenchDeps): Promise<number> {
  const { scenarios, stdout, stderr } = deps;
  const args = parseBenchArgs(argv);
  if (typeof args === 'string') {
    stderr.write(`${args}\n${USAGE}\n`);
    return EXIT_USAGE;
  }
  if (args.help) {
    stdout.write(`${USAGE}\n\nscenarios:\n${listText(scenarios)}`);
    return EXIT_OK;
  }
  if (args.list) {
    stdout.write(listText(scenarios));
    return EXIT_OK;
  }
  const machine = deps.machine ?? machineInfo;
  if (args.machine) {
    stdout.write(`${machineRecord(machine())}\n`);
    return EXIT_OK;
  }
  let compare: SavedRun | null = null;
  try {
    if (args.compare !== null) compare = await readRun(args.compare);
    if (args.from !== null) return await reportFromFile(args, compare, machine, stderr);
  } catch (err) {
    stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT_USAGE;
  }
  const unknown = args.names.filter((n) => !scenarios.some((s) => s.name === n));
  if (unknown.length > 0) {
    stderr.write(`unknown scenario ${unknown.map((n) => `"${n}"`).join(', ')}; the scenarios are:\n${listText(scenarios)}`);
    return EXIT_USAGE;
  }
  const selected = args.names.length === 0 ? scenarios : args.names.map((n) => scenarios.find((s) => s.name === n)!);
  const isolate = selected.length > 1 && !args.inProcess ? deps.isolate : undefined;
  let failed = 0;
  let missed = 0;
  const lines: ResultLine[] = [];
  const where = args.html !== null ? machine() : null;
  for (const s of selected) {
    if (deps.signal?.aborted === true) break;
    // an isolated child reports its own progress and summary on the shared stderr
    if (!isolate)
      stderr.write(`[bench] ${s.name}: running ${args.seconds} s (hard limit ${hardLimitMs(args.seconds, deps.graceMs) / 1000} s)\n`);
    const runOpts = deps.graceMs === undefined ? { seconds: args.seconds } : { seconds: args.seconds, graceMs: deps.graceMs };
    const line = isolate
      ? await isolate(s, args.seconds)
      : await runScenario(s, deps.signal ? { ...runOpts, signal: deps.signal } : runOpts);
    stdout.write(`${JSON.stringify(line)}\n`);
    lines.push(line);
    if (isFailure(line)) failed++;
    else if (!line.pass) missed++;
    if (!isolate || isFailure(line)) stderr.write(`[bench] ${s.name}: ${summary(line)}\n`);
  }
  if (args.html !== null) {
    // written even after Ctrl-C or a failure: the page shows what ran
    const page = renderReport({
      lines,
      machine: where,
      source: 'this run',
      compare,
      command: commandLine(argv),
      generatedAt: new Date().toISOString(),
    });
    try {
      await writeFile(args.html, page);
      stderr.write(`[bench] report: ${args.html} (${lines.length} scenarios)\n`);
    } catch (err) {
      stderr.write(`[bench] report: cannot write ${args.html}: ${err instanceof Error ? err.message : String(err)}\n`);
      failed++;
    }
  }
  if (deps.signal?.aborted === true) return EXIT_INTERRUPTED;
  return failed > 0 || (args.strict && missed > 0) ? EXIT_FAILED : EXIT_OK;
}

function summary(line: ResultLine): string {
  if (typeof line.error === 'string') return `FAILED: ${line.error}`;
  const vs = line.ceiling === null ? '' : ` vs ceiling ${line.ceiling} ${line.unit} = ratio ${line.ratio}`;
  const target = line.target === null ? '' : `; target ${line.target} ${line.pass ? 'met' : 'MISSED'}`;
  const problems = Array.isArray(line.problems) ? `; PROBLEMS: ${line.problems.join('; ')}` : '';
  return `${line.value} ${line.unit}${vs}${target}${problems}`;
}

function commandLine(argv: readonly string[]): string {
  return ['npm run bench --', ...argv].map((a) => (/^[\w./:=@+-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(' ');
}

/**
 * `--from RUN.ndjson`: the report of a saved run, nothing measured. Named scenarios narrow it to
 * those (each must be in the file). Without a machine record in the file the page shows the
 * machine rendering it, and says so.
 */
async function reportFromFile(
  args: BenchArgs,
  compare: SavedRun | null,
  machine: () => MachineInfo,
  stderr: BenchDeps['stderr'],
): Promise<number> {
  const run = await readRun(args.from!);
  for (const why of run.skipped) stderr.write(`[bench] ${args.from}: skipped ${why}\n`);
  const missing = args.names.filter((n) => !run.lines.some((l) => l.scenario === n));
  if (missing.length > 0) throw new Error(`${args.from} has no result line for ${missing.map((n) => `"${n}"`).join(', ')}`);
  const lines = args.names.length === 0 ? run.lines : run.lines.filter((l) => args.names.includes(l.scenario));
  const page = renderReport({
    lines,
    machine: run.machine ?? machine(),
    ...(run.machine
      ? {}
      : {
          machineNote: `${args.from} does not record where it ran (save one with --machine); shown is the machine that rendered this page`,
        }),
    source: args.from!,
    compare,
    command: commandLine([
      '--html',
      args.html!,
      '--from',
      args.from!,
      ...(args.compare !== null ? ['--compare', args.compare] : []),
      ...args.names,
    ]),
    generatedAt: new Date().toISOString(),
  });
  await writeFile(args.html!, page);
  stderr.write(`[bench] report: ${args.html} (${lines.length} scenarios from ${args.from})\n`);
  return EXIT_OK;
}
