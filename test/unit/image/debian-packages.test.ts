import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  baseMirror,
  IMAGE_PACKAGES,
  parseAptSources,
  parseSimulatedInstall,
  privateApt,
  requiredPackages,
  sourcesList,
} from '../../../src/image/debian-packages.js';

const DEB822 = `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`;
const NODESOURCE = `Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
`;

void describe('debian image packages', () => {
  void test('the host Debian sources are found in deb822 files; other repositories are ignored', () => {
    const s = parseAptSources([
      { name: 'debian.sources', text: DEB822 },
      { name: 'nodesource.sources', text: NODESOURCE },
      { name: 'gcloud.list', text: 'deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n' },
    ]);
    assert.deepEqual(
      s.map((x) => `${x.uri} ${x.suite}`),
      [
        'http://deb.debian.org/debian bookworm',
        'http://deb.debian.org/debian bookworm-updates',
        'http://deb.debian.org/debian-security bookworm-security',
      ],
    );
    assert.equal(s[0]?.signedBy, '/usr/share/keyrings/debian-archive-keyring.gpg');
    assert.equal(baseMirror(s), 'http://deb.debian.org/debian');
    assert.equal(
      sourcesList(s).split('\n')[0],
      'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main',
    );
  });

  void test('one-line sources.list entries work too (options, comments, extra components, deb-src ignored)', () => {
    const text = [
      '# comment',
      'deb-src http://mirror.example/debian bookworm main',
      'deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main contrib # trailing',
      'deb http://mirror.example/debian bookworm-updates contrib',
      'deb http://security.example/debian-security bookworm-security main',
    ].join('\n');
    const s = parseAptSources([{ name: 'sources.list', text }]);
    assert.deepEqual(s, [
      { uri: 'http://mirror.example/debian', suite: 'bookworm', components: ['main'], signedBy: '/k.gpg' },
      { uri: 'http://security.example/debian-security', suite: 'bookworm-security', components: ['main'] },
    ]);
  });

  void test('a host without a Debian source for the suite is refused clearly', () => {
    assert.throws(() => baseMirror(parseAptSources([{ name: 'x.sources', text: NODESOURCE }])), /no source for Debian bookworm main/);
    assert.deepEqual(parseAptSources([{ name: 'd.sources', text: DEB822.replace(/^Types: deb$/gm, 'Types: deb\nEnabled: no') }]), []);
  });

  void test("apt's simulated install becomes sorted, unique name=version pins", () => {
    const sim = [
      'Reading package lists...',
      'Inst libc6 (2.36-9+deb12u14 Debian:12.15/oldstable [amd64]) []',
      'Inst gcc-12-base (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64])',
      'Conf libc6 (2.36-9+deb12u14 Debian:12.15/oldstable [amd64])',
      'Inst linux-image-6.1.0-56-cloud-amd64 (6.1.192-2 Debian-Security:12/oldstable-security [amd64])',
      'Inst libc6 (2.36-9+deb12u14 Debian:12.15/oldstable [amd64])',
    ].join('\n');
    assert.deepEqual(parseSimulatedInstall(sim), [
      'gcc-12-base=12.2.0-14+deb12u1',
      'libc6=2.36-9+deb12u14',
      'linux-image-6.1.0-56-cloud-amd64=6.1.192-2',
    ]);
  });

  void test('Priority: required packages are picked from dumpavail stanzas', () => {
    const avail =
      'Package: dash\nPriority: required\nVersion: 1\n\nPackage: tmux\nPriority: optional\n\nPackage: apt\nPriority: required\n';
    assert.deepEqual(requiredPackages(avail), ['apt', 'dash']);
  });

  void test('property: the parsers never throw and keep their output shapes on arbitrary text', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), (text) => {
        for (const p of parseSimulatedInstall(text)) assert.match(p, /^\S+=\S+$/);
        for (const s of parseAptSources([
          { name: 'a.sources', text },
          { name: 'b.list', text },
        ]))
          assert.match(s.uri, /^https?:\/\//);
        requiredPackages(text);
      }),
      { numRuns: 300 },
    );
  });

  void test('the package list holds what the issue asks for', () => {
    for (const p of ['systemd', 'cloud-init', 'tmux', 'git', 'ca-certificates', 'iproute2', 'linux-image-amd64', 'initramfs-tools'])
      assert.ok(IMAGE_PACKAGES.includes(p), p);
  });

  void test('the private apt configuration sees only the given sources and an empty package database', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sbx-apt-'));
    try {
      const opts = await privateApt(dir, parseAptSources([{ name: 'd.sources', text: DEB822 }]));
      assert.ok(opts.includes(`Dir::Etc::SourceList=${join(dir, 'sources.list')}`));
      assert.ok(opts.includes(`Dir::State::status=${join(dir, 'status')}`));
      assert.equal((await readFile(join(dir, 'sources.list'), 'utf8')).split('\n').filter((l) => l.startsWith('deb ')).length, 3);
      assert.equal(await readFile(join(dir, 'status'), 'utf8'), '');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
