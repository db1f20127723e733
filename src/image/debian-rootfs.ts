/**
 * Work on the debootstrap root of the `debian` image: commands inside it, and the clean-up and
 * time clamping that make the disk reproducible.
 *
 * Every command inside the root runs in a private mount namespace (`unshare --mount`) that
 * mounts fresh proc, sysfs and devpts instances: they vanish with the process, so a failed step
 * can never leave a host mount below the work folder (which is removed afterwards).
 */
import { lstat, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './run.js';

/** Mounts inside the namespace, then `exec chroot ROOT env VARS... CMD...` ($0 is the root). */
const CHROOT_SCRIPT =
  'mount -t proc proc "$0/proc" && mount -t sysfs sysfs "$0/sys" && mount -t devpts -o newinstance,ptmxmode=0666 devpts "$0/dev/pts" && exec chroot "$0" "$@"';

/** Environment of every command in the root (no host locale, no prompts). */
export const CHROOT_ENV: readonly string[] = [
  'PATH=/usr/sbin:/usr/bin:/sbin:/bin',
  'LC_ALL=C.UTF-8',
  'DEBIAN_FRONTEND=noninteractive',
  'HOME=/root',
];

/** argv (for `unshare`) of `cmd` run inside `root` with CHROOT_ENV plus `env`. */
export function chrootArgs(root: string, cmd: readonly string[], env: readonly string[] = []): string[] {
  return ['--mount', '--propagation', 'private', '--', 'sh', '-ec', CHROOT_SCRIPT, root, 'env', '-i', ...CHROOT_ENV, ...env, ...cmd];
}

/** Runs `cmd` inside `root`; stdout as text. Default timeout 20 min (package installs). */
export async function inRoot(root: string, cmd: readonly string[], env: readonly string[] = [], timeoutMs = 1_200_000): Promise<string> {
  return (await run('unshare', chrootArgs(root, cmd, env), { timeoutMs, maxBuffer: 256 * 1024 * 1024 })).toString();
}

/**
 * SOURCE_DATE_EPOCH of the image: the newest mtime of the files the packages ship under /usr
 * (dpkg keeps the .deb's mtimes there, and no maintainer script edits them), so it depends on
 * the package set only. Files made at build time are clamped to it (clampTimes).
 */
export async function packagesEpoch(root: string): Promise<number> {
  const info = join(root, 'var', 'lib', 'dpkg', 'info');
  let newestMs = 0;
  for (const f of (await readdir(info)).filter((n) => n.endsWith('.list'))) {
    for (const p of (await readFile(join(info, f), 'utf8')).split('\n')) {
      if (!p.startsWith('/usr/')) continue;
      const s = await lstat(join(root, p)).catch(() => null);
      if (s?.isFile() === true && s.mtimeMs > newestMs) newestMs = s.mtimeMs;
    }
  }
  if (newestMs === 0) throw new Error('no package files found to date the image');
  return Math.floor(newestMs / 1000);
}

/** Sets every mtime newer than `epoch` (s) to `epoch` (links themselves, not their targets). */
export async function clampTimes(root: string, epoch: number): Promise<void> {
  await run('find', [root, '-xdev', '-newermt', `@${epoch}`, '-exec', 'touch', '--no-dereference', `--date=@${epoch}`, '{}', '+'], {
    timeoutMs: 300_000,
  });
}

/** Paths (inside the root) that hold caches, logs, host details or per-machine identity: emptied or removed. */
export const VOLATILE_PATHS: readonly string[] = [
  '/var/cache/apt',
  '/var/lib/apt/lists',
  '/var/log',
  '/var/cache/debconf',
  '/var/cache/ldconfig',
  '/tmp',
  '/var/tmp',
  '/run',
];

/**
 * Leaves the root as a fresh machine: no package caches or lists, no logs, no SSH host keys
 * (openssh-server's postinst made some; each VM makes its own at first boot), an empty machine-id
 * (each VM gets its own at boot; an empty file is not "first boot", so no preset run), no host
 * resolv.conf or policy-rc.d, shadow change dates at the epoch, no backup copies of the user files.
 */
export async function cleanRoot(root: string, epoch: number): Promise<void> {
  for (const p of VOLATILE_PATHS) {
    const dir = join(root, p);
    for (const e of await readdir(dir).catch(() => [] as string[])) {
      if (p === '/var/lib/apt/lists' && e === 'partial') continue;
      if (p === '/var/cache/apt' && e === 'archives') {
        for (const d of await readdir(join(dir, e))) if (d.endsWith('.deb')) await rm(join(dir, e, d), { force: true });
        continue;
      }
      // Logs: keep the folders packages created (journal, apt), drop the files.
      if (p === '/var/log' && (await lstat(join(dir, e))).isDirectory()) {
        for (const d of await readdir(join(dir, e))) await rm(join(dir, e, d), { recursive: true, force: true });
        continue;
      }
      await rm(join(dir, e), { recursive: true, force: true });
    }
  }
  for (const f of [
    '/etc/passwd-',
    '/etc/group-',
    '/etc/shadow-',
    '/etc/gshadow-',
    '/etc/subuid-',
    '/etc/subgid-',
    '/usr/sbin/policy-rc.d',
    '/var/lib/dbus/machine-id',
    '/var/lib/dpkg/status-old',
    '/var/lib/dpkg/diversions-old',
    '/var/lib/dpkg/statoverride-old',
  ]) {
    await rm(join(root, f), { force: true });
  }
  for (const f of await readdir(join(root, 'etc', 'ssh')).catch(() => [] as string[]))
    if (f.startsWith('ssh_host_')) await rm(join(root, 'etc', 'ssh', f), { force: true });
  await writeFile(join(root, 'etc', 'machine-id'), '');
  await symlink('/etc/machine-id', join(root, 'var', 'lib', 'dbus', 'machine-id')).catch(() => undefined);
  await writeFile(join(root, 'etc', 'resolv.conf'), '');
  const shadow = join(root, 'etc', 'shadow');
  await writeFile(shadow, stampShadow(await readFile(shadow, 'utf8'), Math.floor(epoch / 86_400)), { mode: 0o640 });
}

/** /etc/shadow with every "last change" day set to `day` (useradd writes the build day there). */
export function stampShadow(text: string, day: number): string {
  return text
    .split('\n')
    .map((line) => {
      const f = line.split(':');
      if (f.length < 9 || f[2] === '') return line;
      f[2] = String(day);
      return f.join(':');
    })
    .join('\n');
}

/**
 * Paths in `root` that must never ship in an image: SSH host keys (each VM makes its own) and
 * authorized_keys files (only certificates of sandboxd's SSH CA log in). Empty when clean.
 */
export async function bakedSshKeys(root: string): Promise<string[]> {
  const found: string[] = [];
  for (const f of await readdir(join(root, 'etc', 'ssh')).catch(() => [] as string[]))
    if (f.startsWith('ssh_host_')) found.push(`/etc/ssh/${f}`);
  const homes = ['/root', ...(await readdir(join(root, 'home')).catch(() => [] as string[])).map((h) => `/home/${h}`)];
  for (const h of homes)
    for (const f of await readdir(join(root, h, '.ssh')).catch(() => [] as string[]))
      if (f.startsWith('authorized_keys')) found.push(`${h}/.ssh/${f}`);
  return found;
}
