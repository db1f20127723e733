import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { DEBIAN_CMDLINE, debianImageKey, kernelOf, readDebianManifest, type DebianKeyInputs } from '../../../src/image/build-debian.js';
import { debianGuestFiles, initramfsFiles } from '../../../src/image/debian-guest-files.js';
import { chrootArgs, cleanRoot, packagesEpoch, stampShadow } from '../../../src/image/debian-rootfs.js';
import { loadBootImage } from '../../../src/vms/fw-cfg.js';

const inputs: DebianKeyInputs = {
  packages: ['libc6=2.36-9+deb12u14', 'linux-image-6.1.0-56-cloud-amd64=6.1.192-2', 'tmux=3.3a-3'],
  sources: [{ uri: 'http://deb.debian.org/debian', suite: 'bookworm', components: ['main'] }],
  nodeDigest: 'n'.repeat(64),
  npmDigest: 'm'.repeat(64),
  agentDigest: 'a'.repeat(64),
};

void describe('debian image build', () => {
  void test('the cache key covers every input and ignores the order of the package list', () => {
    const k = debianImageKey(inputs);
    assert.match(k, /^[0-9a-f]{16}$/);
    assert.equal(debianImageKey({ ...inputs, packages: [...inputs.packages].reverse() }), k);
    const changed: DebianKeyInputs[] = [
      { ...inputs, packages: ['libc6=2.36-9+deb12u15', 'linux-image-6.1.0-56-cloud-amd64=6.1.192-2', 'tmux=3.3a-3'] },
      { ...inputs, packages: [...inputs.packages, 'curl=7.88.1-10+deb12u14'] },
      { ...inputs, sources: [{ uri: 'http://mirror.example/debian', suite: 'bookworm', components: ['main'] }] },
      { ...inputs, nodeDigest: 'x'.repeat(64) },
      { ...inputs, npmDigest: 'x'.repeat(64) },
      { ...inputs, agentDigest: 'x'.repeat(64) },
    ];
    for (const c of changed) assert.notEqual(debianImageKey(c), k);
    const files = [...initramfsFiles(), ...debianGuestFiles()];
    const edited = files.map((f) => (f.path.endsWith('sandbox-agent.service') ? { ...f, content: `${f.content}# edit\n` } : f));
    assert.equal(debianImageKey(inputs, files), k);
    assert.notEqual(debianImageKey(inputs, edited), k);
  });

  void test('the kernel package and release come from the resolved set', () => {
    assert.deepEqual(kernelOf(inputs.packages), {
      name: 'linux-image-6.1.0-56-cloud-amd64',
      version: '6.1.192-2',
      release: '6.1.0-56-cloud-amd64',
    });
    assert.throws(() => kernelOf(['linux-image-cloud-amd64=6.1.192-2']), /no versioned linux-image/);
  });

  void test('a debian manifest is a boot image for the provisioner (same fw_cfg path as minimal)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sbx-debimg-'));
    try {
      await writeFile(join(dir, 'disk.ext4'), '');
      const manifest = {
        kind: 'debian',
        files: { kernel: 'vmlinux', initrd: 'initrd.img', disk: 'disk.ext4', packages: 'packages.txt' },
        cmdline: DEBIAN_CMDLINE,
      };
      await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest));
      assert.equal((await readDebianManifest(dir))?.kind, 'debian');
      assert.deepEqual(await loadBootImage(join(dir, 'disk.ext4')), {
        kind: 'debian',
        kernel: join(dir, 'vmlinux'),
        initrd: join(dir, 'initrd.img'),
        cmdline: DEBIAN_CMDLINE,
        disk: join(dir, 'disk.ext4'),
      });
      await rm(join(dir, 'disk.ext4'));
      assert.equal(await readDebianManifest(dir), null, 'a folder without its disk is not reused');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  void test('the kernel command line mounts the overlay as root and keeps eth0 named eth0', () => {
    assert.match(DEBIAN_CMDLINE, /\broot=\/dev\/vda\b/);
    assert.match(DEBIAN_CMDLINE, /\bconsole=ttyS0\b/);
    assert.match(DEBIAN_CMDLINE, /\bnet\.ifnames=0\b/);
  });
});

void describe('debian root helpers', () => {
  void test('commands in the root run in a private mount namespace with a clean environment', () => {
    const a = chrootArgs('/r', ['apt-get', 'update'], ['INITRD=No']);
    assert.deepEqual(a.slice(0, 4), ['--mount', '--propagation', 'private', '--']);
    assert.equal(a[7], '/r');
    assert.deepEqual(a.slice(8, 10), ['env', '-i']);
    assert.deepEqual(a.slice(-3), ['INITRD=No', 'apt-get', 'update']);
  });

  void test('shadow change dates are set to the epoch day, other fields kept', () => {
    const text = 'root:*:20400:0:99999:7:::\nagent:!:20413:0:99999:7:::\n';
    assert.equal(stampShadow(text, 19000), 'root:*:19000:0:99999:7:::\nagent:!:19000:0:99999:7:::\n');
    assert.equal(stampShadow('nobody:*::0:99999:7:::\n', 19000), 'nobody:*::0:99999:7:::\n');
  });

  void test('the epoch is the newest packaged file under /usr; cleaning leaves a fresh machine', async () => {
    const root = await mkdtemp(join(tmpdir(), 'sbx-root-'));
    try {
      for (const d of [
        'var/lib/dpkg/info',
        'usr/bin',
        'etc',
        'var/lib/apt/lists/partial',
        'var/cache/apt/archives/partial',
        'var/log/apt',
        'var/lib/dbus',
        'tmp',
      ])
        await mkdir(join(root, d), { recursive: true });
      await writeFile(join(root, 'usr/bin/a'), 'a');
      await writeFile(join(root, 'usr/bin/b'), 'b');
      await utimes(join(root, 'usr/bin/a'), 1_600_000_000, 1_600_000_000);
      await utimes(join(root, 'usr/bin/b'), 1_700_000_000, 1_700_000_000);
      await writeFile(join(root, 'etc/made-at-build'), '');
      await writeFile(join(root, 'var/lib/dpkg/info/x.list'), '/.\n/usr\n/usr/bin\n/usr/bin/a\n/usr/bin/b\n/etc/made-at-build\n');
      assert.equal(await packagesEpoch(root), 1_700_000_000);

      await writeFile(join(root, 'etc/machine-id'), '0123456789abcdef0123456789abcdef\n');
      await writeFile(join(root, 'etc/resolv.conf'), 'nameserver 10.0.0.1\n');
      await writeFile(join(root, 'etc/shadow'), 'root:*:20400:0:99999:7:::\n');
      await writeFile(join(root, 'etc/passwd-'), '');
      await writeFile(join(root, 'var/lib/apt/lists/deb.debian.org_Packages'), 'x');
      await writeFile(join(root, 'var/cache/apt/archives/tmux.deb'), 'x');
      await writeFile(join(root, 'var/cache/apt/pkgcache.bin'), 'x');
      await writeFile(join(root, 'var/log/apt/history.log'), 'x');
      await writeFile(join(root, 'var/log/dpkg.log'), 'x');
      await writeFile(join(root, 'tmp/junk'), 'x');
      await cleanRoot(root, 1_700_000_000);
      assert.equal(await readFile(join(root, 'etc/machine-id'), 'utf8'), '');
      assert.equal(await readFile(join(root, 'etc/resolv.conf'), 'utf8'), '');
      assert.equal(await readFile(join(root, 'etc/shadow'), 'utf8'), `root:*:${Math.floor(1_700_000_000 / 86_400)}:0:99999:7:::\n`);
      assert.deepEqual(await readdir(join(root, 'var/lib/apt/lists')), ['partial']);
      assert.deepEqual(await readdir(join(root, 'var/cache/apt')), ['archives']);
      assert.deepEqual(await readdir(join(root, 'var/cache/apt/archives')), ['partial']);
      assert.deepEqual(await readdir(join(root, 'var/log')), ['apt']);
      assert.deepEqual(await readdir(join(root, 'var/log/apt')), []);
      assert.deepEqual(await readdir(join(root, 'tmp')), []);
      assert.equal(await stat(join(root, 'etc/passwd-')).catch(() => null), null);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
