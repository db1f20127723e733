/**
 * Test entry point (`npm test` runs it after set-up, lint and the layering check).
 *
 *   node dist/test/run.js [substring ...]        files whose path contains a substring (all by default)
 *   node dist/test/run.js --stress N [substring]  the main phase N times with a CPU hog on every core
 *
 * It lists every compiled `*.test.js` under dist/test and runs them with node's test runner (the
 * `run()` API, spec reporter), in two phases: the main phase, two files at a time, then the
 * heavy files (the backpressure flood) and the real-VM files (`realvm*`) alone, because they take
 * both cores for minutes and once starved unrelated tests beside them. Each test file runs in its own process with its own HOME,
 * tmux folder and a watchdog for open handles (test/support/test-process.ts, loaded through the
 * inherited execArgv).
 *
 * After each phase it checks that nothing the tests started is still running (leftovers.ts): a
 * leftover is killed, named with the file that started it, and fails the run. The last line is
 * the plain summary `N passed, N failed, N skipped`; the exit code is non-zero on any failure.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { kRunMarker, reapLeftovers } from './support/leftovers.js';

const testRoot = dirname(fileURLToPath(import.meta.url));

/** Per-file time limits, ms: a file still running then is cancelled (and named). */
const kMainFileTimeoutMs = 600_000;
const kRealVmFileTimeoutMs = 1_800_000;
/** How long processes of a finished phase get to exit on their own before they count as left over, ms. */
const kLeftoverGraceMs = 5_000;

function listTests(dir: string): string[] {
  const out: string[] = [];
  for (const ent of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, ent.name);
    if (ent.isDirectory()) out.push(...listTests(p));
    else if (ent.isFile() && ent.name.endsWith('.test.js')) out.push(p);
  }
  return out;
}

/** The .ts a compiled test came from: tsc never deletes the output of a removed test file. */
const sourceOf = (f: string): string => join(testRoot, '..', '..', 'test', relative(testRoot, f).replace(/\.js$/, '.ts'));

function parseArgs(argv: string[]): { stress: number; filters: string[] } {
  const filters: string[] = [];
  let stress = 0;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '--stress') {
      stress = Number(argv[++i]);
      if (!Number.isInteger(stress) || stress < 1) {
        process.stderr.write('--stress takes a whole number of runs (1 or more)\n');
        process.exit(2);
      }
    } else filters.push(a);
  }
  return { stress, filters };
}

interface Tally {
  passed: number;
  failed: number;
  skipped: number;
  /** Names of failed tests (and files), for the stress table. */
  failures: string[];
}

/** Runs one phase through the spec reporter and counts the outcome of every test (suites aside). */
async function runPhase(files: string[], concurrency: number, timeoutMs: number): Promise<Tally> {
  const tally: Tally = { passed: 0, failed: 0, skipped: 0, failures: [] };
  const stream = run({ files, concurrency, timeout: timeoutMs });
  stream.on('test:pass', (d) => {
    // A skipped suite counts once; a suite that ran is counted through its tests.
    if (d.skip !== undefined || d.todo !== undefined) tally.skipped++;
    else if (d.details.type !== 'suite') tally.passed++;
  });
  stream.on('test:fail', (d) => {
    if (d.details.type === 'suite') return;
    tally.failed++;
    tally.failures.push(d.file !== undefined && d.name !== d.file ? `${relative(testRoot, d.file)} › ${d.name}` : d.name);
  });
  const reporter: NodeJS.ReadableStream = stream.compose(new spec());
  await new Promise<void>((resolve, reject) => {
    reporter.on('error', reject).on('end', resolve).pipe(process.stdout, { end: false });
  });
  return tally;
}

/** Runs a phase, then fails it for every process its tests left running. */
async function runChecked(
  runId: string,
  files: string[],
  concurrency: number,
  timeoutMs: number,
  hogs: ReadonlySet<number>,
): Promise<Tally> {
  const tally = await runPhase(files, concurrency, timeoutMs);
  for (const p of await reapLeftovers(runId, hogs, kLeftoverGraceMs)) {
    process.stdout.write(
      `✖ left running after its tests: pid ${p.pid} (${p.cmdline.slice(0, 160)}), started by ${p.file ?? 'an unknown file'}; killed\n`,
    );
    tally.failed++;
    tally.failures.push(`leftover pid ${p.pid} from ${p.file ?? '?'}`);
  }
  return tally;
}

/** One busy-loop process per core, so the tests run on a machine with no idle CPU. */
function startHog(): ChildProcess[] {
  const env = { ...process.env };
  delete env[kRunMarker];
  // Each busy loop also ends when its parent is gone (its ppid changes), so a runner killed
  // without running its exit handler leaves no hog behind.
  const loop = 'const p = process.ppid; for (let i = 0; ; i++) if ((i & 0xfffff) === 0 && process.ppid !== p) process.exit(0);';
  return Array.from({ length: availableParallelism() }, () => spawn(process.execPath, ['-e', loop], { stdio: 'ignore', env }));
}

const { stress, filters } = parseArgs(process.argv.slice(2));
const compiled = listTests(testRoot).filter((f) => filters.length === 0 || filters.some((s) => relative(testRoot, f).includes(s)));
const stale = compiled.filter((f) => !existsSync(sourceOf(f)));
for (const f of stale) process.stderr.write(`skipping ${relative(testRoot, f)}: its source was removed (stale build output)\n`);
const files = compiled.filter((f) => !stale.includes(f)).sort();
if (files.length === 0) {
  process.stderr.write(`no test files matched ${filters.join(' ')}\n`);
  process.exit(1);
}
const isRealVm = (f: string): boolean => relative(testRoot, f).split('/').at(-1)?.startsWith('realvm') === true;
/** Files that keep both cores busy on their own (8 × 64 MiB through the server; a 1 GiB download): they run alone, after the main phase. */
const isHeavy = (f: string): boolean =>
  ['agents-backpressure.test.js', 'storage-download-stream.test.js'].includes(relative(testRoot, f).split('/').at(-1) ?? '');
const mainFiles = files.filter((f) => !isRealVm(f) && !isHeavy(f));
const heavyFiles = files.filter(isHeavy);
const realVmFiles = files.filter(isRealVm);

// Every test-file process inherits the runner's execArgv (node's run() passes it on): the preload
// gives each file its own HOME and tmux folder and watches for open handles.
process.execArgv.push(`--import=${pathToFileURL(join(testRoot, 'support', 'test-process.js')).href}`);
const runId = randomUUID();
process.env[kRunMarker] = runId;
process.env['SANDBOXD_TEST'] = '1';

const total: Tally = { passed: 0, failed: 0, skipped: 0, failures: [] };
const add = (t: Tally): void => {
  total.passed += t.passed;
  total.failed += t.failed;
  total.skipped += t.skipped;
};

if (stress > 0) {
  const hogs = startHog();
  const stopHogs = (): void => hogs.forEach((h) => h.kill('SIGKILL'));
  process.once('exit', stopHogs);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));
  const hogPids = new Set(hogs.map((h) => h.pid ?? -1));
  const rows: string[] = [];
  for (let i = 1; i <= stress && mainFiles.length + heavyFiles.length > 0; i++) {
    const started = Date.now();
    const t: Tally = { passed: 0, failed: 0, skipped: 0, failures: [] };
    for (const [phase, concurrency] of [
      [mainFiles, 2],
      [heavyFiles, 1],
    ] as const) {
      if (phase.length === 0) continue;
      const p = await runChecked(runId, phase, concurrency, kMainFileTimeoutMs, hogPids);
      t.passed += p.passed;
      t.failed += p.failed;
      t.skipped += p.skipped;
      t.failures.push(...p.failures);
    }
    add(t);
    rows.push(
      `| ${i} | ${t.failed === 0 ? 'green' : 'RED'} | ${t.passed} | ${t.failed} | ${t.skipped} | ${Math.round((Date.now() - started) / 1000)} | ${t.failures.slice(0, 5).join('; ')} |`,
    );
  }
  stopHogs();
  process.stdout.write(`\nstress: main phase ×${stress} with ${hogs.length} busy-loop processes beside it\n\n`);
  process.stdout.write(
    `| run | result | passed | failed | skipped | seconds | failures |\n|---|---|---|---|---|---|---|\n${rows.join('\n')}\n\n`,
  );
} else {
  if (mainFiles.length > 0) add(await runChecked(runId, mainFiles, 2, kMainFileTimeoutMs, new Set()));
  if (heavyFiles.length > 0) add(await runChecked(runId, heavyFiles, 1, kMainFileTimeoutMs, new Set()));
  if (realVmFiles.length > 0) add(await runChecked(runId, realVmFiles, 1, kRealVmFileTimeoutMs, new Set()));
}
process.stdout.write(`\n${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped\n`);
process.exit(total.failed === 0 ? 0 : 1);
