#!/usr/bin/env node
// @ts-check
/**
 * Idempotent set-up, run by `npm start`, `npm test` and `npm run bench` before anything else.
 *
 * It is plain JavaScript with no dependencies because it runs before `npm ci` and before the
 * TypeScript build exist. Steps, each skipped when already satisfied (a second run takes well
 * under a second):
 *   1. Debian packages the project needs (runtime set, plus the test set with --tests),
 *      installed with apt-get as root, with `sudo -n` otherwise, or a one-line instruction.
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

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = new Set(process.argv.slice(2));
const wantTests = args.has('--tests');
const checkOnly = args.has('--check');
const quiet = args.has('--quiet');

/** Debian packages and why. Keep in sync with README "Requirements". */
const RUNTIME_PACKAGES = [
  ['libvirt-dev', 'headers the libvirt binding builds against'],
  ['libvirt-clients', 'virsh, for what the binding lacks (domain events through a daemon)'],
  ['tmux', 'managed interactive sessions'],
  ['git', 'task workspaces are shallow clones'],
  ['openssl', 'certificate inspection in docs and tests'],
];
const TEST_PACKAGES = [
  ['openssh-server', 'real sshd for gateway SSH tests'],
  ['chromium', 'headless dashboard tests'],
  ['prometheus', 'promtool checks /metrics'],
  ['libvirt-daemon', 'libvirtd for daemon-backed hypervisor tests (test+unix:// URIs)'],
];

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

/** @param {string} pkg */
function debInstalled(pkg) {
  const r = run('dpkg-query', ['-W', '-f=${Status}', pkg], { capture: true });
  return r.status === 0 && r.stdout.includes('install ok installed');
}

function ensureDebianPackages() {
  if (run('dpkg-query', ['--version'], { capture: true }).status !== 0) {
    say('dpkg not found: not Debian; skipping system packages (install the README requirements by hand)');
    return true;
  }
  const wanted = wantTests ? [...RUNTIME_PACKAGES, ...TEST_PACKAGES] : RUNTIME_PACKAGES;
  const missing = wanted.map((entry) => String(entry[0])).filter((p) => !debInstalled(p));
  if (missing.length === 0) return true;
  if (checkOnly) {
    say(`missing Debian packages: ${missing.join(' ')}`);
    return false;
  }
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const sudo = !isRoot && run('sudo', ['-n', 'true'], { capture: true }).status === 0;
  if (!isRoot && !sudo) {
    process.stderr.write(
      `[setup] missing Debian packages; run: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing.join(' ')}\n`,
    );
    process.exit(1);
  }
  const prefix = isRoot ? [] : ['sudo', '-n'];
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  say(`installing Debian packages: ${missing.join(' ')}`);
  /** @param {string[]} argv */
  const apt = (argv) => {
    const [cmd, ...rest] = [...prefix, 'apt-get', ...argv];
    return run(/** @type {string} */ (cmd), rest, { env });
  };
  if (apt(['update', '-qq']).status !== 0) say('apt-get update failed; trying the install with the lists we have');
  const r = apt(['install', '-y', '-qq', '--no-install-recommends', ...missing]);
  if (r.status !== 0) {
    process.stderr.write(`[setup] apt-get install failed (exit ${r.status}) for: ${missing.join(' ')}\n`);
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
