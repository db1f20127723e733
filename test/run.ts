/**
 * Test entry point (`npm test` runs it after set-up, lint and the layering check).
 *
 * Node 20's test runner neither discovers .js files in nested folders by pattern nor expands
 * globs, so this lists every compiled `*.test.js` under dist/test and hands them to
 * `node --test`, whose summary ("# pass N / # fail N") is what CI reads; the real-VM files run
 * in a second `node --test` of their own (see below), and the exit code is non-zero if either failed.
 *
 * Usage: node dist/test/run.js [substring ...]   (only files whose path contains a substring)
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const testRoot = dirname(fileURLToPath(import.meta.url));

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

const filters = process.argv.slice(2);
const compiled = listTests(testRoot).filter((f) => filters.length === 0 || filters.some((s) => relative(testRoot, f).includes(s)));
const stale = compiled.filter((f) => !existsSync(sourceOf(f)));
for (const f of stale) process.stderr.write(`skipping ${relative(testRoot, f)}: its source was removed (stale build output)\n`);
const files = compiled.filter((f) => !stale.includes(f)).sort();
if (files.length === 0) {
  process.stderr.write(`no test files matched ${filters.join(' ')}\n`);
  process.exit(1);
}

/**
 * Real-VM tests (`realvm*`) run after the rest, alone: their TCG guests take both cores for
 * minutes, which starved unrelated tests running beside them (a CLI task test timed out on CI).
 */
const isRealVm = (f: string): boolean => relative(testRoot, f).split('/').at(-1)?.startsWith('realvm') === true;
const phases = [
  { files: files.filter((f) => !isRealVm(f)), concurrency: 2 },
  { files: files.filter(isRealVm), concurrency: 1 },
].filter((p) => p.files.length > 0);

function runPhase(phase: { files: string[]; concurrency: number }): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--test', '--test-reporter=spec', `--test-concurrency=${phase.concurrency}`, '--test-timeout=300000', ...phase.files],
      { stdio: 'inherit', env: { ...process.env, SANDBOXD_TEST: '1' } },
    );
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

let failed = 0;
for (const phase of phases) {
  const code = await runPhase(phase);
  if (code !== 0) failed = code;
}
process.exit(failed);
