#!/usr/bin/env node
// @ts-check
/**
 * Idempotent set-up, run by `npm start`, `npm test` and `npm run bench` before anything else.
 *
 * It is plain JavaScript with no dependencies because it runs before `npm ci` and before the
 * TypeScript build exist. Steps, each skipped when already satisfied (a second run takes well
 * under a second):
 *   1. Debian packages the project needs (programs.mjs: the start step, plus the test step with
 *      --tests), installed with apt-get as root, with `sudo -n` otherwise, or a one-line
 *      instruction.
 *   2. `npm ci` when node_modules is missing or older than package-lock.json / package.json.
 *      Native packages build from source through their install scripts, which package.json
 *      approves in "allowScripts" (better-sqlite3, node-pty, @unraid/libvirt).
 *   3. `npm run build` when any source file is newer than the last build.
 *
 * Flags: --tests (also the test-only packages), --check (report, change nothing; exit 1 if work
 * is needed), --quiet.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { aptInstallLine, missingPackages, missingPrograms } from './programs.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = new Set(process.argv.slice(2));
const wantTests = args.has('--tests');
const checkOnly = args.has('--check');
const quiet = args.has('--quiet');

/**
 * Which steps of the program table (programs.mjs) set-up installs. base too: a stripped root
 * may lack a required package, and then its name is printed like any other. Nothing else: the
 * real-VM tests, which `npm test` runs when root, call `image build` and `host prepare`, and
 * those install their own programs before spawning them (src/image/run.ts ensureStepPrograms).
 */
const STEPS = wantTests ? /** @type {const} */ (['base', 'start', 'test']) : /** @type {const} */ (['base', 'start']);

/** @param {string} msg */
function say(msg) {
  if (!quiet) process.stderr.write(`[setup] ${msg}\n`);
}

/**
 * @param {string} cmd
 * @param {string[]} argv
 * @param {{env?: NodeJS.ProcessEnv, capture?: boolean}} [opts]
 */
function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, {
    cwd: root,
    stdio: opts.capture ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    env: opts.env ?? process.env,
    encoding: 'utf8',
  });
  return { status: r.status ?? (r.error ? 127 : 1), stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

function ensureDebianPackages() {
  if (run('dpkg-query', ['--version'], { capture: true }).status !== 0) {
    say('dpkg not found: not Debian; skipping system packages (install the README requirements by hand)');
    return true;
  }
  const missing = [...new Set(STEPS.flatMap((step) => missingPackages(step)))].sort();
  if (missing.length === 0) return true;
  const programs = STEPS.flatMap((step) => missingPrograms(step));
  const what = `${missing.join(' ')}${programs.length > 0 ? ` (for ${programs.join(', ')})` : ''}`;
  if (checkOnly) {
    say(`missing Debian packages: ${what}`);
    return false;
  }
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const sudo = !isRoot && run('sudo', ['-n', 'true'], { capture: true }).status === 0;
  if (!isRoot && !sudo) {
    process.stderr.write(`[setup] missing Debian packages: ${what}; run: sudo apt-get update && sudo ${aptInstallLine(missing)}\n`);
    process.exit(1);
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  say(`installing Debian packages: ${what}`);
  /** @param {string[]} argv */
  const apt = (argv) => (isRoot ? run('apt-get', argv, { env }) : run('sudo', ['-n', 'apt-get', ...argv], { env }));
  if (apt(['update', '-qq']).status !== 0) say('apt-get update failed; trying the install with the lists we have');
  const r = apt(['install', '-y', '-qq', '--no-install-recommends', ...missing]);
  const still = STEPS.flatMap((step) => missingPrograms(step));
  if (r.status !== 0 || still.length > 0) {
    process.stderr.write(
      `[setup] apt-get install failed (exit ${r.status}${still.length > 0 ? `; still missing: ${still.join(', ')}` : ''}); run: ${aptInstallLine(missing)}\n`,
    );
    process.exit(1);
  }
  return true;
}

function nodeModulesStamp() {
  const h = createHash('sha256');
  h.update(readFileSync(join(root, 'package-lock.json')));
  h.update(readFileSync(join(root, 'package.json')));
  h.update(process.version);
  return h.digest('hex');
}

function ensureNodeModules() {
  const stampFile = join(root, 'node_modules', '.sandboxd-setup-stamp');
  const want = nodeModulesStamp();
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8').trim() === want) return true;
  if (checkOnly) {
    say('node_modules missing or stale');
    return false;
  }
  say('node_modules missing or stale: npm ci');
  const r = run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error']);
  if (r.status !== 0) {
    process.stderr.write(`[setup] npm ci failed (exit ${r.status})\n`);
    process.exit(1);
  }
  writeFileSync(stampFile, `${want}\n`);
  return true;
}

const SOURCE_DIRS = ['src', 'actors', 'proto', 'test', 'native-bench'];
const SOURCE_FILES = ['tsconfig.json', 'package.json', 'package-lock.json'];

/** @param {string} dir @returns {number} newest mtime below dir */
function newestMtime(dir) {
  let newest = 0;
  /** @type {string[]} */
  const stack = [dir];
  while (stack.length > 0) {
    const d = /** @type {string} */ (stack.pop());
    for (const ent of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, ent.name);
      if (ent.isDirectory()) stack.push(p);
      else if (ent.isFile()) newest = Math.max(newest, statSync(p).mtimeMs);
    }
  }
  return newest;
}

function ensureBuild() {
  const stampFile = join(root, 'dist', '.build-stamp');
  let newest = 0;
  for (const d of SOURCE_DIRS) if (existsSync(join(root, d))) newest = Math.max(newest, newestMtime(join(root, d)));
  for (const f of SOURCE_FILES) if (existsSync(join(root, f))) newest = Math.max(newest, statSync(join(root, f)).mtimeMs);
  if (existsSync(stampFile) && statSync(stampFile).mtimeMs >= newest) return true;
  if (checkOnly) {
    say('build is out of date');
    return false;
  }
  say('building (npm run build)');
  const started = Date.now();
  const r = run('npm', ['run', '--silent', 'build']);
  if (r.status !== 0) {
    process.stderr.write(`[setup] build failed (exit ${r.status})\n`);
    process.exit(1);
  }
  mkdirSync(join(root, 'dist'), { recursive: true });
  writeFileSync(stampFile, `${new Date().toISOString()}\n`);
  say(`built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return true;
}

const ok = ensureDebianPackages() && ensureNodeModules() && ensureBuild();
process.exit(ok ? 0 : 1);
