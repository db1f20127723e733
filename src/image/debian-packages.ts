/**
 * Which Debian packages, at which versions, go into the `debian` image, resolved by the host's
 * apt before anything is downloaded (so the versions are part of the cache key):
 *
 * - the mirrors are the ones apt already uses on this host (sources.list and deb822 .sources
 *   entries for the suite, its -updates and -security), nothing else;
 * - apt resolves, against an empty package database and only those sources, the whole set
 *   (Priority: required, as debootstrap's minbase installs, plus IMAGE_PACKAGES and their
 *   dependencies, no recommends) to exact name=version pairs;
 * - the chroot then installs exactly those pairs, and the builder checks that the root holds
 *   nothing else.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './run.js';

/** The Debian release the image is built from. */
export const DEBIAN_SUITE = 'bookworm';

/**
 * What the image holds besides the minbase set: systemd as init, cloud-init (its cffi backend
 * named because debootstrap-era resolvers miss the virtual package), Debian's generic kernel
 * (the cloud kernel is built without 9p, which the agent share needs) and initramfs-tools, what
 * tasks and sessions use (tmux, screen, git, curl, sudo, ...), and openssh-server for SSH leases
 * (its host keys are removed from the root; sandboxd-sshd.service makes one at first boot,
 * guest-ssh.ts).
 */
export const IMAGE_PACKAGES: readonly string[] = [
  'usr-is-merged',
  'systemd',
  'systemd-sysv',
  'udev',
  'kmod',
  'dbus',
  'iproute2',
  'netbase',
  'ca-certificates',
  'cloud-init',
  'python3-cffi-backend',
  'linux-image-amd64',
  'initramfs-tools',
  'zstd',
  'tmux',
  'screen',
  'git',
  'curl',
  'sudo',
  'procps',
  'less',
  'xz-utils',
  'openssh-server',
];

/** One apt source line. */
export interface AptSource {
  uri: string;
  suite: string;
  components: string[];
  signedBy?: string;
}

/**
 * The host's Debian sources for `suite` (plus `<suite>-updates` and `<suite>-security`, main only)
 * from sources.list one-line entries and deb822 stanzas. Other repositories are ignored.
 */
export function parseAptSources(texts: readonly { name: string; text: string }[], suite = DEBIAN_SUITE): AptSource[] {
  const wanted = new Set([suite, `${suite}-updates`, `${suite}-security`]);
  const out: AptSource[] = [];
  const add = (uri: string, suites: string[], components: string[], signedBy: string | undefined): void => {
    if (!components.includes('main') || !/^https?:\/\//.test(uri)) return;
    for (const s of suites) {
      if (!wanted.has(s) || out.some((o) => o.uri === uri && o.suite === s)) continue;
      out.push({ uri: uri.replace(/\/+$/, ''), suite: s, components: ['main'], ...(signedBy !== undefined ? { signedBy } : {}) });
    }
  };
  for (const { name, text } of texts) {
    if (name.endsWith('.sources')) {
      for (const stanza of text.split(/\n\s*\n/)) {
        const f = new Map<string, string>();
        for (const line of stanza.split('\n')) {
          const m = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
          if (m?.[1] !== undefined && m[2] !== undefined) f.set(m[1].toLowerCase(), m[2].trim());
        }
        if (!(f.get('types') ?? '').split(/\s+/).includes('deb') || (f.get('enabled') ?? 'yes') === 'no') continue;
        const words = (k: string): string[] => (f.get(k) ?? '').split(/\s+/).filter((w) => w !== '');
        for (const uri of words('uris')) add(uri, words('suites'), words('components'), f.get('signed-by'));
      }
      continue;
    }
    for (const raw of text.split('\n')) {
      const line = raw.replace(/#.*$/, '').trim();
      const m = /^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s+(.+)$/.exec(line);
      if (m?.[2] === undefined || m[3] === undefined || m[4] === undefined) continue;
      const signed = /signed-by=(\S+)/.exec(m[1] ?? '')?.[1];
      add(m[2], [m[3]], m[4].split(/\s+/), signed);
    }
  }
  return out;
}

/** sources.list text for the sources (the image keeps it, so apt works inside the VM too). */
export function sourcesList(sources: readonly AptSource[]): string {
  return sources
    .map(
      (s) =>
        `deb ${s.signedBy !== undefined && !s.signedBy.includes('\n') ? `[signed-by=${s.signedBy}] ` : ''}${s.uri} ${s.suite} ${s.components.join(' ')}\n`,
    )
    .join('');
}

/** The mirror debootstrap fetches the base from: the source of the plain suite. */
export function baseMirror(sources: readonly AptSource[], suite = DEBIAN_SUITE): string {
  const s = sources.find((x) => x.suite === suite);
  if (s === undefined) throw new Error(`apt on this host has no source for Debian ${suite} main (see /etc/apt/sources.list*)`);
  return s.uri;
}

/** Reads the host's apt source files (sources.list and sources.list.d/*.list|*.sources). */
export async function readHostSources(etcApt = '/etc/apt'): Promise<AptSource[]> {
  const texts: { name: string; text: string }[] = [];
  const main = await readFile(join(etcApt, 'sources.list'), 'utf8').catch(() => null);
  if (main !== null) texts.push({ name: 'sources.list', text: main });
  const dir = join(etcApt, 'sources.list.d');
  for (const f of (await readdir(dir).catch(() => [] as string[])).sort()) {
    if (f.endsWith('.list') || f.endsWith('.sources')) texts.push({ name: f, text: await readFile(join(dir, f), 'utf8') });
  }
  return parseAptSources(texts);
}

/** `Inst name (version ...)` lines of `apt-get -s install` as sorted name=version pairs. */
export function parseSimulatedInstall(output: string): string[] {
  const pins = new Set<string>();
  for (const m of output.matchAll(/^Inst (\S+) \((\S+) /gm)) if (m[1] !== undefined && m[2] !== undefined) pins.add(`${m[1]}=${m[2]}`);
  return [...pins].sort();
}

/** Package names whose stanza says `Priority: required` (apt-cache dumpavail output). */
export function requiredPackages(dumpavail: string): string[] {
  const out = new Set<string>();
  let pkg = '';
  for (const line of dumpavail.split('\n')) {
    if (line.startsWith('Package: ')) pkg = line.slice(9).trim();
    else if (line === 'Priority: required' && pkg !== '') out.add(pkg);
  }
  return [...out].sort();
}

/** Options that make apt see only `sources` (lists from the host's cache) and an empty package database. */
export async function privateApt(workDir: string, sources: readonly AptSource[]): Promise<string[]> {
  await mkdir(join(workDir, 'sources.list.d'), { recursive: true });
  await writeFile(join(workDir, 'sources.list'), sourcesList(sources));
  await writeFile(join(workDir, 'status'), '');
  return [
    '-o',
    `Dir::Etc::SourceList=${join(workDir, 'sources.list')}`,
    '-o',
    `Dir::Etc::SourceParts=${join(workDir, 'sources.list.d')}`,
    '-o',
    `Dir::State::status=${join(workDir, 'status')}`,
    '-o',
    'APT::Install-Recommends=false',
    '-o',
    'Debug::NoLocking=true',
  ];
}

/**
 * resolvePackages, remembered in `<workDir>/resolved.json` while apt's lists (names, sizes,
 * mtimes), the sources and IMAGE_PACKAGES are unchanged: a cached build then answers in about a
 * second instead of re-running apt's resolver (4-5 s).
 */
export async function resolvePackagesCached(
  workDir: string,
  aptOpts: readonly string[],
  listsDir = '/var/lib/apt/lists',
): Promise<string[]> {
  const h = createHash('sha256').update(`${IMAGE_PACKAGES.join(' ')}\n${aptOpts.join(' ')}\n`);
  h.update(await readFile(join(workDir, 'sources.list')));
  for (const f of (await readdir(listsDir)).sort()) {
    const s = await stat(join(listsDir, f));
    if (s.isFile()) h.update(`${f} ${s.size} ${s.mtimeMs}\n`);
  }
  const key = h.digest('hex');
  const file = join(workDir, 'resolved.json');
  const cached = await readFile(file, 'utf8').then(
    (t) => JSON.parse(t) as { key?: string; packages?: string[] },
    () => null,
  );
  if (cached?.key === key && Array.isArray(cached.packages)) return cached.packages;
  const packages = await resolvePackages(aptOpts);
  await writeFile(file, `${JSON.stringify({ key, packages })}\n`);
  return packages;
}

/** The image's exact package set, name=version, sorted. Rejects naming the packages apt cannot find. */
export async function resolvePackages(aptOpts: readonly string[]): Promise<string[]> {
  const avail = (await run('apt-cache', [...aptOpts, 'dumpavail'], { maxBuffer: 512 * 1024 * 1024 })).toString();
  const required = requiredPackages(avail);
  if (required.length === 0) throw new Error('apt knows no Debian package of this suite (run apt-get update?)');
  const names = [...new Set([...required, ...IMAGE_PACKAGES])];
  const sim = (await run('apt-get', [...aptOpts, '-s', 'install', ...names], { timeoutMs: 120_000 })).toString();
  const pins = parseSimulatedInstall(sim);
  const missing = IMAGE_PACKAGES.filter((n) => !pins.some((p) => p.startsWith(`${n}=`)));
  if (missing.length > 0) throw new Error(`apt would not install ${missing.join(', ')}`);
  return pins;
}
