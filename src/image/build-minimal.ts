/**
 * Builds the `minimal` guest image from Debian packages and the project's own files:
 *
 *   vmlinux         the Debian kernel, uncompressed, booted through QEMU's PVH entry (no in-guest
 *                   xz decompression: about 2 s faster under TCG)
 *   initramfs.cpio  busybox-static, the virtio/ext4/fw_cfg modules (9p too, loaded when the VM
 *                   has its agent share) and /init (guest-init.ts)
 *   disk.ext4       raw ext4 (mke2fs -d, no mount needed): the host's node binary and its libraries,
 *                   the sandbox-agent bundle with its V8 code cache (agent-bundle.ts), tmux and git
 *   manifest.json   what was built from what (the provisioner reads it next to the disk)
 *
 * Packages come only from apt (`apt-get download` + `dpkg-deb -x`). The output folder is named by
 * a hash of every input, so an unchanged build is reused at once (cached by content).
 */
import { createHash } from 'node:crypto';
import { chmod, cp, mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { GUEST_INIT, GUEST_MODULES, SHARE_MODULES } from './guest-init.js';
import {
  agentBundleFor,
  candidateVersion,
  exists,
  extractVmlinux,
  fileDigest,
  installAgent,
  listFiles,
  makeExt4,
  publishImage,
  uuidFrom,
} from './image-files.js';
import { ensureAptLists, ensureStepPrograms, run } from './run.js';

/** Bumped when the layout or the recipe changes (part of the cache key). */
export const IMAGE_RECIPE_VERSION = 'minimal-3';
/** The guest's userland: downloaded and unpacked, never installed on the host. */
export const BUSYBOX_PACKAGE = 'busybox-static';
/** Size of the sparse disk file, MiB (the agent's work dir lives on the per-VM overlay of it). */
export const DISK_SIZE_MIB = 2048;

export interface BuildOptions {
  /** Output root; the image goes to `<outDir>/minimal-<hash>/`. */
  outDir: string;
  /** Compiled tree holding the agent (its bundle is <agentTree>/agent: agent-bundle.ts). */
  agentTree: string;
  /** Folder with package.json and node_modules. */
  packageRoot: string;
  /** Default /usr/bin/node. */
  nodePath?: string;
  log?: (line: string) => void;
}

export interface ImageManifest {
  kind: 'minimal';
  hash: string;
  recipe: string;
  kernelPackage: string;
  kernelVersion: string;
  busyboxVersion: string;
  nodeVersion: string;
  files: { kernel: string; initrd: string; disk: string };
  cmdline: string;
  builtAt: string;
}

export interface BuildResult {
  dir: string;
  manifest: ImageManifest;
  reused: boolean;
  elapsedMs: number;
}

/**
 * Kernel command line of the minimal image. quiet: the serial console is slow under TCG. The rest
 * skips boot work a VM does not need (about 10 % of the kernel's CPU time to /init under TCG):
 * crypto self-tests, three of the four legacy UARTs, the TSC checks, audit; RCU grace periods
 * are expedited (each insmod waits for some).
 */
export const MINIMAL_CMDLINE =
  'console=ttyS0 quiet panic=-1 rdinit=/init cryptomgr.notests rcupdate.rcu_expedited=1 8250.nr_uarts=1 no_timer_check tsc=reliable audit=0';

/** Builds (or reuses) the minimal image. Rejects with the failing step's output. */
export async function buildMinimalImage(o: BuildOptions): Promise<BuildResult> {
  const t0 = Date.now();
  const log = o.log ?? (() => undefined);
  const nodePath = o.nodePath ?? '/usr/bin/node';
  const kernelPackage = await resolveKernelPackage();
  const kernelVersion = await candidateVersion(kernelPackage);
  const busyboxVersion = await candidateVersion(BUSYBOX_PACKAGE);
  const nodeVersion = (await run(nodePath, ['--version'])).toString().trim();
  const agent = await agentBundleFor(o.agentTree, o.packageRoot);
  const h = createHash('sha256');
  h.update(
    [
      IMAGE_RECIPE_VERSION,
      kernelPackage,
      kernelVersion,
      busyboxVersion,
      GUEST_INIT,
      GUEST_MODULES.join(','),
      SHARE_MODULES.join(','),
      MINIMAL_CMDLINE,
    ].join('\n'),
  );
  h.update(await fileDigest(nodePath));
  h.update(`agent ${agent.key}\n`);
  const hash = h.digest('hex').slice(0, 16);
  const dir = join(o.outDir, `minimal-${hash}`);
  const existing = await readManifest(dir);
  if (existing !== null) {
    log(`image ${dir} is up to date (inputs unchanged)`);
    return { dir, manifest: existing, reused: true, elapsedMs: Date.now() - t0 };
  }
  // cpio and the kernel's decompressor: installed (root) or named before the first one is spawned.
  await ensureStepPrograms('image', { kind: 'minimal', log });
  const tmp = join(o.outDir, `.tmp-minimal-${hash}-${process.pid}`);
  await rm(tmp, { recursive: true, force: true });
  await mkdir(join(tmp, 'debs'), { recursive: true });
  try {
    log(`downloading ${kernelPackage} ${kernelVersion} and ${BUSYBOX_PACKAGE} ${busyboxVersion}`);
    await run('apt-get', ['download', `${kernelPackage}=${kernelVersion}`, `${BUSYBOX_PACKAGE}=${busyboxVersion}`], {
      cwd: join(tmp, 'debs'),
      timeoutMs: 300_000,
    });
    const debs = await readdir(join(tmp, 'debs'));
    const kdeb = debs.find((d) => d.startsWith(`${kernelPackage}_`));
    const bdeb = debs.find((d) => d.startsWith(`${BUSYBOX_PACKAGE}_`));
    if (kdeb === undefined || bdeb === undefined) throw new Error(`apt-get download gave ${debs.join(', ')}`);
    await run('dpkg-deb', ['-x', join(tmp, 'debs', kdeb), join(tmp, 'kpkg')]);
    await run('dpkg-deb', ['-x', join(tmp, 'debs', bdeb), join(tmp, 'bbpkg')]);
    const kver = kernelPackage.replace(/^linux-image-/, '');
    log('extracting vmlinux');
    await writeFile(join(tmp, 'vmlinux'), await extractVmlinux(join(tmp, 'kpkg', 'boot', `vmlinuz-${kver}`)));
    log('building the initramfs');
    await buildInitramfs(
      join(tmp, 'initrd-root'),
      join(tmp, 'kpkg', 'lib', 'modules', kver),
      join(tmp, 'bbpkg', 'bin', 'busybox'),
      join(tmp, 'initramfs.cpio'),
    );
    log('building the disk (node, sandbox-agent, tmux, git)');
    await buildDiskRoot(join(tmp, 'disk-root'), agent.dir, nodePath);
    await makeExt4(join(tmp, 'disk-root'), join(tmp, 'disk.ext4'), {
      label: 'sbx-image',
      sizeMiB: DISK_SIZE_MIB,
      uuid: uuidFrom(hash),
      hashSeed: uuidFrom(hash),
      fakeTime: 1700000000,
      timeoutMs: 300_000,
    });
    const manifest: ImageManifest = {
      kind: 'minimal',
      hash,
      recipe: IMAGE_RECIPE_VERSION,
      kernelPackage,
      kernelVersion,
      busyboxVersion,
      nodeVersion,
      files: { kernel: 'vmlinux', initrd: 'initramfs.cpio', disk: 'disk.ext4' },
      cmdline: MINIMAL_CMDLINE,
      builtAt: new Date().toISOString(),
    };
    for (const d of ['debs', 'kpkg', 'bbpkg', 'initrd-root', 'disk-root']) await rm(join(tmp, d), { recursive: true, force: true });
    await publishImage(tmp, dir, manifest);
    log(`image ready in ${dir}`);
    return { dir, manifest, reused: false, elapsedMs: Date.now() - t0 };
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

/** The manifest of a built image folder, or null. */
export async function readManifest(dir: string): Promise<ImageManifest | null> {
  try {
    const m = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as ImageManifest;
    return m.kind === 'minimal' ? m : null;
  } catch {
    return null;
  }
}

async function resolveKernelPackage(): Promise<string> {
  await ensureAptLists();
  const out = (await run('apt-cache', ['depends', 'linux-image-amd64'])).toString();
  const m = /Depends:\s*(linux-image-[0-9][^\s]*-amd64)/.exec(out);
  if (m?.[1] === undefined) throw new Error(`apt-cache depends linux-image-amd64 names no kernel package:\n${out}`);
  return m[1];
}

async function buildInitramfs(root: string, modulesDir: string, busybox: string, out: string): Promise<void> {
  for (const d of ['bin', 'sbin', 'etc', 'proc', 'sys', 'dev', 'run', 'tmp', 'root', 'lib/modules', 'opt/sbx'])
    await mkdir(join(root, d), { recursive: true });
  await cp(busybox, join(root, 'bin', 'busybox'));
  await chmod(join(root, 'bin', 'busybox'), 0o755);
  const applets = (await run(busybox, ['--list']))
    .toString()
    .split('\n')
    .filter((a) => a !== '' && a !== 'busybox' && a !== 'init');
  for (const a of applets) await symlink('busybox', join(root, 'bin', a));
  const all = await listFiles(join(modulesDir, 'kernel'));
  for (const m of [...GUEST_MODULES, ...SHARE_MODULES]) {
    const f = all.find((p) => basename(p) === `${m}.ko`);
    if (f === undefined) throw new Error(`module ${m}.ko not found in the kernel package`);
    await cp(f, join(root, 'lib', 'modules', `${m}.ko`));
  }
  await writeFile(join(root, 'etc', 'modules.order'), `${GUEST_MODULES.join('\n')}\n`);
  await writeFile(join(root, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  await writeFile(join(root, 'etc', 'group'), 'root:x:0:\n');
  await writeFile(join(root, 'etc', 'hosts'), '127.0.0.1 localhost\n');
  await writeFile(join(root, 'init'), GUEST_INIT, { mode: 0o755 });
  await chmod(join(root, 'init'), 0o755);
  const list = (await run('find', ['.', '-mindepth', '1'], { cwd: root }))
    .toString()
    .split('\n')
    .filter((l) => l !== '')
    .sort();
  await writeFile(
    out,
    await run('cpio', ['--quiet', '-o', '-H', 'newc', '--reproducible', '-R', '0:0'], {
      cwd: root,
      input: Buffer.from(`${list.join('\n')}\n`),
      maxBuffer: 256 * 1024 * 1024,
    }),
  );
}

async function buildDiskRoot(root: string, agentBundle: string, nodePath: string): Promise<void> {
  await mkdir(join(root, 'bin'), { recursive: true });
  await mkdir(join(root, 'lib'), { recursive: true });
  await mkdir(join(root, 'work'), { recursive: true });
  const bins = [nodePath, '/usr/bin/tmux', '/usr/bin/git'];
  const libs = new Set<string>();
  for (const b of bins) {
    if (!(await exists(b))) continue; // tmux/git are optional on the build host
    await cp(b, join(root, 'bin', basename(b)));
    for (const l of await sharedLibs(b)) libs.add(l);
  }
  for (const l of libs) await cp(l, join(root, 'lib', basename(l)), { dereference: true });
  // tmux refuses to start without a UTF-8 locale; glibc's C.utf8 is enough (LOCPATH in /init).
  if (await exists('/usr/lib/locale/C.utf8'))
    await cp('/usr/lib/locale/C.utf8', join(root, 'locale', 'C.utf8'), { recursive: true, dereference: true });
  if (await exists('/lib/terminfo')) await cp('/lib/terminfo', join(root, 'terminfo'), { recursive: true, dereference: true });
  await installAgent(join(root, 'agent'), agentBundle, nodePath);
}

/** Absolute paths of the shared libraries `ldd` resolves for a binary (incl. the loader). */
async function sharedLibs(binary: string): Promise<string[]> {
  const out = (await run('ldd', [binary])).toString();
  return [...out.matchAll(/(\/[^\s]+\.so[^\s]*)/g)].map((m) => m[1] ?? '').filter((p) => p !== '');
}
