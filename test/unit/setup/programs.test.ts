import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readlinkSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { ensureStepPrograms } from '../../../src/image/run.js';
import { BUSYBOX_PACKAGE } from '../../../src/image/build-minimal.js';
import { IMAGE_PACKAGES } from '../../../src/image/debian-packages.js';
import {
  aptInstallLine,
  missingPackages,
  missingPrograms,
  packagesForStep,
  PROGRAMS,
  STEPS,
  type Program,
  type Step,
} from '../../../src/setup/programs.mjs';
import { repoRoot } from '../../support/paths.js';
import { scanSource, scanTree } from '../../support/spawn-sites.js';

const SCANNED = ['src', 'actors', 'proto', 'test', 'native-bench'];
const STEP_ORDER = Object.keys(STEPS) as Step[];
const entries: [string, Program][] = Object.entries(PROGRAMS);
const DEBIAN_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
const hasDpkg = spawnSync('dpkg-query', ['--version']).status === 0;

/** path → the packages dpkg says own it (one dpkg-query call for all). */
function dpkgOwners(paths: readonly string[]): Map<string, string[]> {
  const out = spawnSync('dpkg-query', ['-S', ...paths], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 }).stdout;
  const owners = new Map<string, string[]>();
  for (const line of out.split('\n')) {
    const m = /^([^:]+(?::[a-z0-9]+)?): (\/.*)$/.exec(line);
    if (m === null || line.startsWith('diversion by')) continue;
    owners.set(
      m[2] ?? '',
      (m[1] ?? '').split(', ').map((p) => p.replace(/:[a-z0-9]+$/, '')),
    );
  }
  return owners;
}

/** Every path a program is reached through here: each Debian folder's entry and each symlink hop after it. */
function pathsOf(program: string): string[] {
  const out: string[] = [];
  for (const d of DEBIAN_DIRS) {
    let p = `${d}/${program}`;
    for (let hop = 0; hop < 8 && existsSync(p) && !out.includes(p); hop++) {
      out.push(p);
      if (!lstatSync(p).isSymbolicLink()) break;
      p = resolve(dirname(p), readlinkSync(p));
    }
  }
  return out;
}

void describe('the program table (src/setup/programs.mjs)', () => {
  void test('every program the sources spawn is in it (file:line program)', () => {
    const sites = scanTree(repoRoot, SCANNED);
    assert.ok(sites.length > 50, `the scanner found only ${sites.length} spawn sites: it has gone blind`);
    const unknown = sites.filter((s) => !Object.hasOwn(PROGRAMS, s.program));
    const owners = hasDpkg ? dpkgOwners(unknown.flatMap((s) => pathsOf(s.program))) : new Map<string, string[]>();
    const hint = (program: string): string => {
      const pkgs = [...new Set(pathsOf(program).flatMap((p) => owners.get(p) ?? []))];
      return pkgs.length > 0 ? ` (here it comes from the Debian package ${pkgs.join(', ')})` : ' (not installed here)';
    };
    assert.deepEqual(
      unknown.map((s) => `${s.file}:${s.line} ${s.program}${hint(s.program)}`),
      [],
      'these spawned programs are missing from src/setup/programs.mjs: add each with its Debian package and the step that installs it',
    );
  });

  void test('the scanner reports an unknown program with its line, through wrappers and prefixes', () => {
    const snippet = [
      "import { execFile, spawn as launch } from 'node:child_process';", // 1
      "import { promisify } from 'node:util';",
      "import { run } from '../image/run.js';",
      'const execFileAsync = promisify(execFile);',
      "const TOOL = '/usr/sbin/tool-a';", // 5
      "launch('tool-b', ['x']);",
      'void execFileAsync(TOOL, []);',
      "void run('env', ['A=1', `B=${1}`, 'tool-c', '-v']);",
      "void run('unshare', ['--mount', '--', 'tool-d']);",
      "inRoot(root, ['tool-e', 'install']);", // 10
      "function fooArgv(): string[] { return ['tool-f', 'list']; }",
      'function runLocal(cmd: string) { return launch(cmd, []); }',
      "runLocal('sudo', ['-n', 'tool-g']);",
      "launch(opts.path ?? 'tool-h', []);",
      'launch(process.execPath, []);', // 15
      "notASpawner('tool-i', []);",
      "const { execFileSync } = await import('node:child_process');",
      "execFileSync('tool-j');",
    ].join('\n');
    const found = scanSource('snippet.ts', snippet).map((s) => `${s.line} ${s.program}`);
    assert.deepEqual(found, [
      '6 tool-b',
      '7 tool-a',
      '8 env',
      '8 tool-c',
      '9 unshare',
      '9 tool-d',
      '10 tool-e',
      '11 tool-f',
      '13 sudo',
      '13 tool-g',
      '14 tool-h',
      '15 node',
      '18 tool-j',
    ]);
    assert.ok(!Object.hasOwn(PROGRAMS, 'tool-b'), 'an unknown program stays unknown: the first test would name snippet.ts:6');
  });

  void test('every entry is well formed: a known step, a package unless given, a reason, later alsoIn steps', () => {
    for (const [name, p] of entries) {
      assert.ok(STEP_ORDER.includes(p.step), `${name}: unknown step ${p.step}`);
      assert.ok(p.why.length > 10, `${name}: say who runs it and why`);
      if (p.step !== 'given')
        assert.match(p.debianPackage ?? '', /^[a-z0-9][a-z0-9+.-]+$/, `${name}: a ${p.step} program names its Debian package`);
      for (const s of p.alsoIn ?? [])
        assert.ok(
          STEP_ORDER.indexOf(s) > STEP_ORDER.indexOf(p.step) && s !== 'guest',
          `${name}: alsoIn ${s} must be a later installing step`,
        );
      if (p.kinds !== undefined) assert.equal(p.step, 'image', `${name}: only image programs have kinds`);
    }
  });

  void test("guest programs come with an image's own packages", () => {
    for (const [name, p] of entries.filter(([, e]) => e.step === 'guest')) {
      assert.ok(
        IMAGE_PACKAGES.includes(p.debianPackage ?? '') || p.debianPackage === BUSYBOX_PACKAGE,
        `${name}: ${p.debianPackage} is in no image's package set`,
      );
    }
  });

  void test(
    'base packages are Priority: required, as in every minbase root',
    { skip: hasDpkg ? false : 'not Debian (no dpkg-query)' },
    () => {
      const base = [...new Set(entries.filter(([, p]) => p.step === 'base').map(([, p]) => p.debianPackage ?? ''))];
      const out = spawnSync('dpkg-query', ['-W', '-f=${Package} ${Priority}\\n', ...base], { encoding: 'utf8' }).stdout;
      for (const pkg of base)
        assert.match(
          out,
          new RegExp(`^${pkg} required$`, 'm'),
          `${pkg} is not Priority: required, so minbase lacks it: give its programs an installing step`,
        );
    },
  );

  void test(
    'each program installed here comes from the package the table names',
    { skip: hasDpkg ? false : 'not Debian (no dpkg-query)' },
    () => {
      const paths = entries.flatMap(([name]) => pathsOf(name));
      const owners = dpkgOwners(paths);
      let checked = 0;
      for (const [name, p] of entries) {
        const found = [...new Set(pathsOf(name).flatMap((path) => owners.get(path) ?? []))];
        if (found.length === 0 || p.debianPackage === null) continue; // not installed here, or not from Debian
        checked++;
        // python3 (what node-gyp needs: the whole standard library) ships its binary in python3-minimal.
        const viaDependency = !found.includes(p.debianPackage) && found.some((f) => dependsOn(p.debianPackage ?? '').includes(f));
        assert.ok(
          found.includes(p.debianPackage) || viaDependency,
          `${name}: the table says ${p.debianPackage}, dpkg says ${found.join(', ')}`,
        );
      }
      assert.ok(checked >= 20, `only ${checked} programs could be checked against dpkg`);
    },
  );

  void test(
    'every named package exists in the apt lists',
    { skip: aptListsReady() ? false : 'no apt lists here (apt-get update has not run)' },
    () => {
      const pkgs = [...new Set(STEP_ORDER.flatMap((s) => packagesForStep(s)))];
      const out = spawnSync('apt-cache', ['policy', ...pkgs], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 }).stdout;
      for (const pkg of pkgs)
        assert.match(
          out,
          new RegExp(`^${pkg.replace(/[+.]/g, '\\$&')}:\\n\\s+Installed: .*\\n\\s+Candidate: (?!\\(none\\))`, 'm'),
          `${pkg}: apt knows no such package`,
        );
    },
  );

  void test('set-up installs what npm start and npm test spawn; image build and host prepare their own', () => {
    assert.ok(packagesForStep('start').includes('tmux') && packagesForStep('start').includes('libvirt-dev'));
    assert.ok(packagesForStep('test').includes('chromium'));
    assert.ok(packagesForStep('image', 'minimal').includes('cpio'), 'image build installs cpio (the fresh-machine failure of issue 13)');
    assert.ok(!packagesForStep('image', 'minimal').includes('debootstrap') && packagesForStep('image', 'debian').includes('debootstrap'));
    assert.ok(
      packagesForStep('host').includes('libvirt-daemon') && packagesForStep('host').includes('libvirt-clients'),
      'host prepare checks libvirtd and virsh too',
    );
  });

  void test('a step whose program is missing refuses with the one apt-get line', async () => {
    const packages = missingPackages('image', 'minimal');
    const run = ensureStepPrograms('image', { kind: 'minimal', install: false });
    if (packages.length === 0) {
      await run; // everything is installed here: nothing to refuse
      return;
    }
    const programs = missingPrograms('image', 'minimal');
    await assert.rejects(
      run,
      (err: Error) => err.message.includes(aptInstallLine(packages)) && programs.every((p) => err.message.includes(p)),
    );
  });
});

/** Names of the installed package's direct dependencies (Pre-Depends too). */
function dependsOn(pkg: string): string[] {
  const out = spawnSync('dpkg-query', ['-W', '-f=${Pre-Depends}, ${Depends}', pkg], { encoding: 'utf8' }).stdout;
  return out
    .split(/[,|]/)
    .map((d) => d.trim().split(/[\s:]/)[0] ?? '')
    .filter((d) => d !== '');
}

function aptListsReady(): boolean {
  try {
    return readdirSync('/var/lib/apt/lists').some((f) => /_Packages(\.lz4)?$/.test(f));
  } catch {
    return false;
  }
}
