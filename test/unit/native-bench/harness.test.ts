import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, hardLimitMs, runBench, runIsolated } from '../../../native-bench/harness.js';
import type { ResultLine } from '../../../native-bench/harness.js';
import type { BenchScenario } from '../../../native-bench/types.js';
import { DEADLINE_MS, waitFor } from '../../support/wait.js';

/** Scenarios standing in for real ones: no speed is measured or asserted anywhere here. */
const seenSignals: AbortSignal[] = [];
const seenSeconds: number[] = [];
const fake: Record<string, BenchScenario> = {
  quick: {
    name: 'quick',
    description: 'resolves at once',
    unit: 'MB/s',
    target: { ratioAtLeast: 0.4 },
    run: ({ seconds }) => {
      seenSeconds.push(seconds);
      return Promise.resolve({ value: 42, ceiling: 84, extra: { records: 10, lost: 0, scenario: 'spoofed', ratio: 99 } });
    },
  },
  bare: { name: 'bare', description: 'no ceiling, no target', unit: 'ms', run: () => Promise.resolve({ value: 3.14159, ceiling: null }) },
  missed: {
    name: 'missed',
    description: 'misses its target',
    unit: 'ms',
    target: { valueAtMost: 1 },
    run: () => Promise.resolve({ value: 7, ceiling: null }),
  },
  hangs: {
    name: 'hangs',
    description: 'never settles and ignores its signal',
    unit: 'MB/s',
    run: ({ signal }) => {
      seenSignals.push(signal);
      return new Promise(() => undefined);
    },
  },
  throws: { name: 'throws', description: 'rejects', unit: 'MB/s', run: () => Promise.reject(new Error('worker crashed')) },
  lossy: {
    name: 'lossy',
    description: 'reports a problem',
    unit: 'MB/s',
    run: () => Promise.resolve({ value: 1, ceiling: 2, problems: ['3 records lost'] }),
  },
  nan: { name: 'nan', description: 'returns garbage', unit: 'MB/s', run: () => Promise.resolve({ value: Number.NaN, ceiling: 1 }) },
};
const all = Object.values(fake);

async function bench(argv: string[], opts: { scenarios?: BenchScenario[]; signal?: AbortSignal; graceMs?: number } = {}) {
  let out = '';
  let err = '';
  const code = await runBench(argv, {
    scenarios: opts.scenarios ?? all,
    stdout: { write: (t: string) => (out += t) },
    stderr: { write: (t: string) => (err += t) },
    graceMs: opts.graceMs ?? 300,
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  const lines = out.split('\n').filter((l) => l !== '');
  return {
    code,
    out,
    err,
    lines,
    /** stdout parsed as result lines (throws unless every line is JSON) */
    get results(): ResultLine[] {
      return lines.map((l) => JSON.parse(l) as ResultLine);
    },
  };
}

void describe('bench harness', () => {
  void test('a scenario prints exactly one JSON line: contract fields first, extras after, ratio = value ÷ ceiling', async () => {
    const r = await bench(['quick', '--seconds', '0.2']);
    assert.equal(r.code, EXIT_OK);
    assert.equal(r.lines.length, 1);
    const line = r.results[0]!;
    assert.deepEqual(Object.keys(line), ['scenario', 'value', 'unit', 'ceiling', 'ratio', 'target', 'pass', 'records', 'lost', 'seconds']);
    assert.equal(line.scenario, 'quick', 'an extra cannot overwrite a contract field');
    assert.equal(line.value, 42);
    assert.equal(line.unit, 'MB/s');
    assert.equal(line.ceiling, 84);
    assert.equal(line.ratio, 0.5);
    assert.equal(line.target, 'ratio >= 0.4');
    assert.equal(line.pass, true);
    assert.equal(line.lost, 0);
    assert.equal(seenSeconds.at(-1), 0.2, 'the scenario gets --seconds');
    assert.match(r.err, /quick/, 'progress goes to stderr');
  });

  void test('without a ceiling, ratio and target are null; without --strict a missed target still exits 0', async () => {
    const r = await bench(['bare', 'missed', '--seconds=0.1', '--in-process']);
    assert.equal(r.code, EXIT_OK);
    assert.equal(r.lines.length, 2);
    const [bare, missed] = r.results;
    assert.equal(bare!.ratio, null);
    assert.equal(bare!.ceiling, null);
    assert.equal(bare!.target, null);
    assert.equal(bare!.pass, true);
    assert.equal(missed!.pass, false);
    assert.equal(missed!.target, 'value <= 1');
    assert.equal((await bench(['missed', '--strict'])).code, EXIT_FAILED);
  });

  void test('a scenario that never finishes is reported failed at its hard limit, and its signal is aborted', async () => {
    const started = Date.now();
    const r = await bench(['hangs', 'quick', '--seconds', '0.05', '--in-process'], { graceMs: 300 });
    const elapsedMs = Date.now() - started;
    assert.equal(hardLimitMs(0.05, 300), 450);
    assert.ok(elapsedMs >= 400, `waited for the limit (${elapsedMs} ms)`);
    assert.ok(elapsedMs < 10_000, `but not much longer (${elapsedMs} ms)`);
    assert.equal(r.code, EXIT_FAILED);
    assert.equal(r.lines.length, 2, 'the next scenario still runs');
    const line = r.results[0]!;
    assert.equal(line.scenario, 'hangs');
    assert.equal(line.value, null);
    assert.equal(line.ratio, null);
    assert.equal(line.pass, false);
    assert.match(line.error as string, /timed out after 450 ms/);
    assert.equal(seenSignals.at(-1)?.aborted, true);
    assert.equal(r.results[1]!.pass, true);
  });

  void test('the default hard limit is 3 × seconds + 10 s', () => {
    assert.equal(hardLimitMs(5), 25_000);
  });

  for (const [name, why] of [
    ['throws', /worker crashed/],
    ['nan', /not a finite number/],
  ] as const) {
    void test(`a scenario that ${name === 'nan' ? 'returns a non-number' : 'rejects'} gets an error line and a non-zero exit`, async () => {
      const r = await bench([name]);
      assert.equal(r.code, EXIT_FAILED);
      assert.equal(r.lines.length, 1);
      assert.equal(r.results[0]!.value, null);
      assert.match(r.results[0]!.error as string, why);
    });
  }

  void test('problems (e.g. lost records) fail the line and the run, keeping the figures', async () => {
    const r = await bench(['lossy']);
    assert.equal(r.code, EXIT_FAILED);
    assert.equal(r.results[0]!.pass, false);
    assert.equal(r.results[0]!.value, 1);
    assert.deepEqual(r.results[0]!.problems, ['3 records lost']);
  });

  void test('an unknown name exits 2 and lists the scenarios on stderr', async () => {
    const r = await bench(['quick', 'nope']);
    assert.equal(r.code, EXIT_USAGE);
    assert.equal(r.out, '');
    assert.match(r.err, /unknown scenario "nope"/);
    for (const s of all) assert.match(r.err, new RegExp(`^${s.name} `, 'm'));
  });

  void test('bad options exit 2', async () => {
    assert.equal((await bench(['--seconds', '0'])).code, EXIT_USAGE);
    assert.equal((await bench(['--seconds', 'abc'])).code, EXIT_USAGE);
    assert.equal((await bench(['--seconds'])).code, EXIT_USAGE);
    assert.equal((await bench(['--fast'])).code, EXIT_USAGE);
  });

  void test('--list prints each scenario with its unit and target, and runs nothing', async () => {
    const before = seenSeconds.length;
    const r = await bench(['--list']);
    assert.equal(r.code, EXIT_OK);
    assert.match(r.out, /^quick +resolves at once \[MB\/s; target ratio >= 0\.4\]$/m);
    assert.match(r.out, /^bare +no ceiling, no target \[ms\]$/m);
    assert.equal(seenSeconds.length, before);
  });

  void test('several scenarios run in child processes when the CLI provides them, unless --in-process', async () => {
    const isolated: string[] = [];
    const isolate = (s: BenchScenario): Promise<ResultLine> => {
      isolated.push(s.name);
      return Promise.resolve({ scenario: s.name, value: 1, unit: s.unit, ceiling: null, ratio: null, target: null, pass: true });
    };
    let out = '';
    const deps = {
      scenarios: [fake.quick!, fake.bare!],
      stdout: { write: (t: string) => (out += t) },
      stderr: { write: () => true },
      isolate,
    };
    assert.equal(await runBench([], deps), EXIT_OK);
    assert.deepEqual(isolated, ['quick', 'bare']);
    assert.equal(out.trim().split('\n').length, 2);
    assert.equal(await runBench(['--in-process'], deps), EXIT_OK);
    assert.equal(await runBench(['quick'], deps), EXIT_OK);
    assert.deepEqual(isolated, ['quick', 'bare'], 'one scenario, or --in-process, runs in this process');
  });

  void test('Ctrl-C aborts the running scenario, reports it and skips the rest (exit 130)', async () => {
    const interrupt = new AbortController();
    setTimeout(() => interrupt.abort(), 100);
    const r = await bench(['hangs', 'quick', '--seconds', '5', '--in-process'], { signal: interrupt.signal, graceMs: 10_000 });
    assert.equal(r.code, EXIT_INTERRUPTED);
    assert.equal(r.lines.length, 1);
    assert.match(r.results[0]!.error as string, /interrupted/);
  });
});

void describe('runIsolated', () => {
  void test('forwards the line a child prints, and reports a child that printed none', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-iso-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const good = join(dir, 'good.mjs');
    writeFileSync(
      good,
      `process.stderr.write('progress\\n'); console.log(JSON.stringify({ scenario: process.argv[2], value: 1, unit: 'MB/s', ceiling: 2, ratio: 0.5, target: null, pass: true, args: process.argv.slice(3) }));`,
    );
    const line = await runIsolated(good, fake.quick!, 0.5);
    assert.equal(line.value, 1);
    assert.deepEqual(line.args, ['--seconds', '0.5', '--in-process']);

    const silent = join(dir, 'silent.mjs');
    writeFileSync(silent, 'process.exitCode = 3;');
    const failed = await runIsolated(silent, fake.quick!, 0.5);
    assert.equal(failed.scenario, 'quick');
    assert.equal(failed.value, null);
    assert.match(failed.error as string, /printed no result line \(exit code 3\)/);
  });

  void test('stops what the scenario left running, on exit and on interrupt', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-iso-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    // the scenario starts a grandchild that would outlive it (and holds its stdout open)
    const leaves = join(dir, 'leaves.mjs');
    writeFileSync(
      leaves,
      `import { spawn } from 'node:child_process';
       import { writeFileSync } from 'node:fs';
       const g = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: ['ignore', 'inherit', 'ignore'] });
       writeFileSync(${JSON.stringify(join(dir, 'pid'))}, String(g.pid));
       if (process.env.BENCH_TEST_HANG !== '1') {
         console.log(JSON.stringify({ scenario: process.argv[2], value: 1, unit: 'x', ceiling: null, ratio: null, target: null, pass: true }));
         process.exit(0);
       }
       setInterval(() => {}, 1000);`,
    );
    // Alive and not a zombie (a killed grandchild waits as one until whoever inherited it reaps it).
    const alive = (pid: number): boolean => {
      try {
        process.kill(pid, 0);
      } catch {
        return false;
      }
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
        return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
      } catch {
        return false;
      }
    };
    // The pid the scenario wrote, or null while the file is missing or being written: writeFileSync
    // truncates before it writes, and a read in between (a preempted writer, under load) got ''
    // which was taken for pid 0, and `kill(0, 0)` (this process group) never fails.
    const writtenPid = (): number | null => {
      try {
        const text = readFileSync(join(dir, 'pid'), 'utf8');
        return /^[1-9]\d*$/.test(text) ? Number(text) : null;
      } catch {
        return null;
      }
    };
    const line = await runIsolated(leaves, fake.quick!, 30);
    assert.equal(line.value, 1);
    const left = writtenPid();
    assert.ok(left !== null);
    await waitFor('the grandchild left by a finished scenario is killed', () => !alive(left), { deadlineMs: DEADLINE_MS.process });

    process.env.BENCH_TEST_HANG = '1';
    t.after(() => delete process.env.BENCH_TEST_HANG);
    const interrupt = new AbortController();
    const pending = runIsolated(leaves, fake.quick!, 30, interrupt.signal);
    const hung = await waitFor(
      'the hanging scenario started its grandchild',
      () => {
        const pid = writtenPid();
        return pid !== null && pid !== left ? pid : undefined;
      },
      { deadlineMs: DEADLINE_MS.process },
    );
    interrupt.abort();
    const failed = await pending;
    assert.equal(failed.value, null);
    await waitFor('an interrupt stops the scenario and its grandchild', () => !alive(hung), { deadlineMs: DEADLINE_MS.process });
  });
});

void describe('native-bench/run.js', () => {
  const runJs = fileURLToPath(new URL('../../../native-bench/run.js', import.meta.url));

  void test('--list names the registered scenarios, starting with ring', () => {
    const r = spawnSync(process.execPath, [runJs, '--list'], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^ring +.*\[MB\/s; target ratio >= 1\]$/m);
  });

  void test('an unknown scenario exits 2 with the list', () => {
    const r = spawnSync(process.execPath, [runJs, 'no-such-scenario'], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /unknown scenario "no-such-scenario"[\s\S]*^ring /m);
  });
});
