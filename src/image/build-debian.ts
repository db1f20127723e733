/**
 * Builds the `debian` guest image: a debootstrap Debian root with systemd, cloud-init and
 * Debian's kernel, for production-like VMs (build-minimal.ts is the fast test image).
 *
 *   vmlinux       Debian's generic kernel (9p as modules, for the agent share), uncompressed,
 *                 booted through QEMU's PVH entry
 *   initrd.img    Debian's initramfs (initramfs-tools, MODULES=list: virtio, ext4, qemu_fw_cfg)
 *   disk.ext4     the root filesystem (raw ext4 made by mke2fs -d, no mount): systemd, cloud-init,
 *                 tmux, git, curl, sudo, the host's node binary (+ npm) and the sandbox-agent
 *                 bundle with its V8 code cache (agent-bundle.ts), started by sandbox-agent.service;
 *                 openssh-server without host keys, run by sandboxd-sshd.service only when the
 *                 VM gets an SSH CA by fw_cfg (guest-ssh.ts)
 *   packages.txt  every package in the root, name=version
 *   manifest.json what was built from what (the provisioner reads it next to the disk)
 *
 * Packages come only from the Debian mirrors apt already uses on this host (debian-packages.ts);
 * the exact versions are resolved first and are part of the folder's name with every other
 * input, so an unchanged build is reused at once. Needs root (debootstrap, chroot, ownership).
 */
import { createHash } from 'node:crypto';
import { chmod, chown, cp, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  DISABLED_UNITS,
  ENABLED_UNITS,
  MASKED_UNITS,
  DEBIAN_AGENT_DIR,
  DEBIAN_GUEST_USER,
  DEBIAN_NODE_PATH,
  debianGuestFiles,
  initramfsFiles,
  type GuestFile,
} from './debian-guest-files.js';
import {
  baseMirror,
  DEBIAN_SUITE,
  privateApt,
  readHostSources,
  resolvePackagesCached,
  sourcesList,
  type AptSource,
} from './debian-packages.js';
import { bakedSshKeys, cleanRoot, clampTimes, inRoot, packagesEpoch } from './debian-rootfs.js';
import {
  agentBundleFor,
  exists,
  extractVmlinux,
  fileDigest,
  hashTree,
  installAgent,
  makeExt4,
  publishImage,
  uuidFrom,
} from './image-files.js';
import { ensureStepPrograms, run } from './run.js';

/** Bumped when the layout or the recipe changes (part of the cache key). */
export const DEBIAN_RECIPE_VERSION = 'debian-4';
/** Size of the sparse disk file, MiB (per-VM overlays grow into it). */
export const DEBIAN_DISK_SIZE_MIB = 4096;
/** Kernel command line: root on the overlay, stable eth0 name, console on the serial port (quiet: slow under TCG). */
export const DEBIAN_CMDLINE = 'console=ttyS0 root=/dev/vda rw quiet net.ifnames=0 panic=-1';
/** The host's npm, copied beside node when present. */
const HOST_NPM = '/usr/lib/node_modules/npm';

export interface DebianBuildOptions {
  /** Output root; the image goes to `<outDir>/debian-<hash>/`. */
  outDir: string;
  /** Compiled tree holding src/bin/sandbox-agent.js (and proto/ if present). */
  agentTree: string;
  /** Folder with package.json and node_modules (production dependencies are copied). */
  packageRoot: string;
  /** Default /usr/bin/node. */
  nodePath?: string;
  log?: (line: string) => void;
}

export interface DebianImageManifest {
  kind: 'debian';
  hash: string;
  recipe: string;
  suite: string;
  mirrors: string[];
  kernelPackage: string;
  kernelVersion: string;
  nodeVersion: string;
  packageCount: number;
  sourceDateEpoch: number;
  files: { kernel: string; initrd: string; disk: string; packages: string };
  cmdline: string;
  builtAt: string;
}

export interface DebianBuildResult {
  dir: string;
  manifest: DebianImageManifest;
  reused: boolean;
  elapsedMs: number;
}

/** Everything the image is made from (the cache key covers all of it). */
export interface DebianKeyInputs {
  packages: readonly string[];
  sources: readonly AptSource[];
  nodeDigest: string;
  npmDigest: string;
  agentDigest: string;
}

/** The image's content hash (16 hex digits): recipe, guest files, package versions, mirrors, node, npm and agent. */
export function debianImageKey(k: DebianKeyInputs, files: readonly GuestFile[] = [...initramfsFiles(), ...debianGuestFiles()]): string {
  const h = createHash('sha256');
  h.update(
    [
      DEBIAN_RECIPE_VERSION,
      DEBIAN_SUITE,
      DEBIAN_CMDLINE,
      String(DEBIAN_DISK_SIZE_MIB),
      ENABLED_UNITS.join(','),
      DISABLED_UNITS.join(','),
      MASKED_UNITS.join(','),
    ].join('\n'),
  );
  for (const f of files) h.update(`\0${f.path}\0${f.mode.toString(8)}\0${f.content}`);
  h.update(`\0${sourcesList(k.sources)}\0${[...k.packages].sort().join('\n')}`);
  h.update(`\0${k.nodeDigest}\0${k.npmDigest}\0${k.agentDigest}`);
  return h.digest('hex').slice(0, 16);
}

/** The kernel package (linux-image-<abi>-amd64) in a resolved package set, with its version. */
export function kernelOf(packages: readonly string[]): { name: string; version: string; release: string } {
  const pin = packages.find((p) => /^linux-image-\d[^=]*=/.test(p));
  if (pin === undefined) throw new Error('the package set has no versioned linux-image package');
  const [name = '', version = ''] = pin.split('=');
  return { name, version, release: name.replace(/^linux-image-/, '') };
}

/** Builds (or reuses) the debian image. Rejects with the failing step's output. */
export async function buildDebianImage(o: DebianBuildOptions): Promise<DebianBuildResult> {
  const t0 = Date.now();
  const log = o.log ?? (() => undefined);
  if (process.getuid?.() !== 0)
    throw new Error('building the debian image needs root (debootstrap, chroot and file ownership); run it as root or use --kind minimal');
  const nodePath = o.nodePath ?? '/usr/bin/node';
  const sources = await readHostSources();
  await mkdir(o.outDir, { recursive: true });
  const aptDir = join(o.outDir, '.debian-apt');
  const packages = await resolvePackagesCached(aptDir, await privateApt(aptDir, sources));
  const kernel = kernelOf(packages);
  const npmHash = createHash('sha256');
  await hashTree(npmHash, dirname(HOST_NPM), 'npm');
  const agent = await agentBundleFor(o.agentTree, o.packageRoot);
  const hash = debianImageKey({
    packages,
    sources,
    nodeDigest: await fileDigest(nodePath),
    npmDigest: npmHash.digest('hex'),
    agentDigest: agent.key,
  });
  const dir = join(o.outDir, `debian-${hash}`);
  const existing = await readDebianManifest(dir);
  if (existing !== null) {
    log(`image ${dir} is up to date (inputs unchanged)`);
    return { dir, manifest: existing, reused: true, elapsedMs: Date.now() - t0 };
  }
  await ensureStepPrograms('image', { kind: 'debian', log });
  const tmp = join(o.outDir, `.tmp-debian-${hash}-${process.pid}`);
  const root = join(tmp, 'rootfs');
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  try {
    const mirror = baseMirror(sources);
    log(`debootstrap ${DEBIAN_SUITE} (minbase) from ${mirror}`);
    await run(
      'unshare',
      ['--mount', '--propagation', 'private', '--', 'debootstrap', '--variant=minbase', '--components=main', DEBIAN_SUITE, root, mirror],
      { timeoutMs: 900_000 },
    );
    await writeFile(join(root, 'etc', 'apt', 'sources.list'), sourcesList(sources));
    await cp('/etc/resolv.conf', join(root, 'etc', 'resolv.conf'), { dereference: true });
    await writeFile(join(root, 'usr', 'sbin', 'policy-rc.d'), '#!/bin/sh\nexit 101\n', { mode: 0o755 });
    await writeGuestFiles(root, initramfsFiles());
    log(`installing ${packages.length} packages at their resolved versions (kernel ${kernel.name} ${kernel.version})`);
    await inRoot(root, ['apt-get', 'update', '-q']);
    // INITRD=No: the initrd is made once below, with the image's SOURCE_DATE_EPOCH.
    await inRoot(root, ['apt-get', 'install', '-y', '-q', '--no-install-recommends', '--allow-downgrades', ...packages], ['INITRD=No']);
    const installed = (await inRoot(root, ['dpkg-query', '-W', '-f', '${Package}=${Version}\\n']))
      .split('\n')
      .filter((l) => l !== '')
      .sort();
    const extra = installed.filter((p) => !packages.includes(p));
    const absent = packages.filter((p) => !installed.includes(p));
    if (extra.length > 0 || absent.length > 0)
      throw new Error(
        `the root differs from the resolved package set (extra: ${extra.join(' ') || '-'}; missing: ${absent.join(' ') || '-'})`,
      );
    const epoch = await packagesEpoch(root);
    log('adding node, sandbox-agent and the guest units');
    await customize(root, nodePath, agent.dir);
    log('building the initramfs');
    await inRoot(root, ['update-initramfs', '-c', '-k', kernel.release], [`SOURCE_DATE_EPOCH=${epoch}`]);
    await writeFile(join(tmp, 'vmlinux'), await extractVmlinux(join(root, 'boot', `vmlinuz-${kernel.release}`)));
    await cp(join(root, 'boot', `initrd.img-${kernel.release}`), join(tmp, 'initrd.img'));
    await writeFile(join(tmp, 'packages.txt'), `${installed.join('\n')}\n`);
    await cleanRoot(root, epoch);
    const baked = await bakedSshKeys(root);
    if (baked.length > 0) throw new Error(`the root would ship SSH keys: ${baked.join(' ')}`);
    await clampTimes(root, epoch);
    log('building disk.ext4');
    await makeExt4(root, join(tmp, 'disk.ext4'), {
      label: 'sbx-debian',
      sizeMiB: DEBIAN_DISK_SIZE_MIB,
      uuid: uuidFrom(`${hash}-fs`),
      hashSeed: uuidFrom(hash),
      fakeTime: epoch,
      timeoutMs: 600_000,
    });
    await rm(root, { recursive: true, force: true });
    const manifest: DebianImageManifest = {
      kind: 'debian',
      hash,
      recipe: DEBIAN_RECIPE_VERSION,
      suite: DEBIAN_SUITE,
      mirrors: [...new Set(sources.map((s) => s.uri))],
      kernelPackage: kernel.name,
      kernelVersion: kernel.version,
      nodeVersion: (await run(nodePath, ['--version'])).toString().trim(),
      packageCount: installed.length,
      sourceDateEpoch: epoch,
      files: { kernel: 'vmlinux', initrd: 'initrd.img', disk: 'disk.ext4', packages: 'packages.txt' },
      cmdline: DEBIAN_CMDLINE,
      builtAt: new Date().toISOString(),
    };
    await publishImage(tmp, dir, manifest);
    log(`image ready in ${dir}`);
    return { dir, manifest, reused: false, elapsedMs: Date.now() - t0 };
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

/** The manifest of a built debian image folder, or null. */
export async function readDebianManifest(dir: string): Promise<DebianImageManifest | null> {
  try {
    const m = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as DebianImageManifest;
    return m.kind === 'debian' && (await exists(join(dir, m.files.disk))) ? m : null;
  } catch {
    return null;
  }
}

async function writeGuestFiles(root: string, files: readonly GuestFile[]): Promise<void> {
  for (const f of files) {
    const p = join(root, f.path);
    await mkdir(dirname(p), { recursive: true });
    await writeFile(p, f.content);
    await chmod(p, f.mode);
  }
}

/** node (+ npm), the agent, the `agent` user, the guest files and the unit set. */
async function customize(root: string, nodePath: string, agentBundle: string): Promise<void> {
  await mkdir(join(root, dirname(DEBIAN_NODE_PATH)), { recursive: true });
  await cp(nodePath, join(root, DEBIAN_NODE_PATH));
  await chmod(join(root, DEBIAN_NODE_PATH), 0o755);
  if (await exists(HOST_NPM)) {
    await cp(HOST_NPM, join(root, 'usr/local/lib/node_modules/npm'), { recursive: true, verbatimSymlinks: true });
    await symlink('../lib/node_modules/npm/bin/npm-cli.js', join(root, 'usr/local/bin/npm'));
    await symlink('../lib/node_modules/npm/bin/npx-cli.js', join(root, 'usr/local/bin/npx'));
  }
  await installAgent(join(root, DEBIAN_AGENT_DIR), agentBundle, nodePath);
  await run('chown', ['-R', '0:0', join(root, DEBIAN_AGENT_DIR), join(root, 'usr/local')]);
  await inRoot(root, ['useradd', '--create-home', '--shell', '/bin/bash', '--uid', '1000', '--user-group', DEBIAN_GUEST_USER]);
  await writeGuestFiles(root, debianGuestFiles());
  await chown(join(root, 'etc/sudoers.d', DEBIAN_GUEST_USER), 0, 0);
  await inRoot(root, ['systemctl', 'disable', ...DISABLED_UNITS]);
  await inRoot(root, ['systemctl', 'enable', ...ENABLED_UNITS]);
  await inRoot(root, ['systemctl', 'mask', ...MASKED_UNITS]);
}
