// @ts-check
/**
 * Every external program the product or its tests run, with the Debian package that provides it
 * and the step that installs it: the one place that says so. Set-up (ensure.mjs), `image build`
 * (src/image) and `host prepare` (src/host) take their package lists from here;
 * test/unit/setup/programs.test.ts finds every spawn site in the sources and fails when one names
 * a program missing here; README's "Quick start" table is generated from it.
 *
 * Plain JavaScript with JSDoc because ensure.mjs loads it before `npm ci` and the build exist.
 *
 * Steps, in the order a fresh root meets them (a program needed by two steps names the first one
 * and lists the others in `alsoIn`, because each step checks its own before it runs anything):
 *   base   in every Debian 12 minbase root (Priority: required); never installed, still named
 *   given  there before set-up runs: Node 20 and npm run set-up itself; sudo is only used if there
 *   start  set-up of `npm start` (ensure.mjs; also `npm test` and `npm run bench`)
 *   test   set-up of `npm test` (ensure.mjs --tests)
 *   image  `sandboxd image build`, before it spawns them (`kinds`: which image kinds need it)
 *   host   `sandboxd host prepare`, before it spawns them
 *   guest  inside a guest image's root, from that image's own package set; never on the host
 *
 * The real-VM tests (root) need no step of their own: they run `image build` and then
 * `host prepare` in-process (test/integration/realvm-harness.ts), which install theirs.
 */

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';

/** @typedef {'base' | 'given' | 'start' | 'test' | 'image' | 'host' | 'guest'} Step */
/** @typedef {'minimal' | 'debian'} ImageKind */
/**
 * @typedef {object} Program
 * @property {string | null} debianPackage null only for `given` programs that Debian 12 lacks
 * @property {Step} step the step that installs it first
 * @property {readonly Step[]} [alsoIn] later steps that also check (and install) it
 * @property {readonly ImageKind[]} [kinds] image step only: the kinds that need it (default both)
 * @property {string} [versionedIn] it is on no PATH but in `<versionedIn>/<version>/bin` (Debian's
 *   PostgreSQL: /usr/lib/postgresql/15/bin); the newest version that has it counts ({@link findProgram})
 * @property {string} why who runs it, for what
 */

/** @type {Readonly<Record<Step, string>>} */
export const STEPS = Object.freeze({
  base: 'nobody: in every Debian 12 minbase root (Priority: required)',
  given: 'you, before anything: Node 20 with npm (Debian 12 has only 18); sudo is optional',
  start: 'set-up of `npm start`, `npm test` and `npm run bench`',
  test: 'set-up of `npm test`',
  image: '`sandboxd image build` (as root), before it runs them',
  host: '`sandboxd host prepare` (as root), before it runs them',
  guest: 'the guest image itself (its own packages), inside its root only',
});

/** @type {Readonly<Record<string, Program>>} */
export const PROGRAMS = Object.freeze({
  'apt-cache': {
    debianPackage: 'apt',
    step: 'base',
    why: "image build: kernel package and candidate versions, the debian image's package set",
  },
  'apt-get': {
    debianPackage: 'apt',
    step: 'base',
    why: 'set-up, image build and host prepare install packages; image build downloads .debs; in the debian root',
  },
  chmod: { debianPackage: 'coreutils', step: 'base', why: "screen and native sessions: the runtime directory's mode 0700 (on the agent)" },
  chown: { debianPackage: 'coreutils', step: 'base', why: 'debian image: the agent files belong to root' },
  chroot: { debianPackage: 'coreutils', step: 'base', why: 'debian image: every command in the root (run by sh inside unshare)' },
  'dpkg-deb': { debianPackage: 'dpkg', step: 'base', why: 'minimal image: unpacks the kernel and busybox packages' },
  'dpkg-query': { debianPackage: 'dpkg', step: 'base', why: 'set-up checks installed packages; the debian image lists its root' },
  env: { debianPackage: 'coreutils', step: 'base', why: 'sets the environment of git clone, mke2fs and apt-get' },
  false: { debianPackage: 'coreutils', step: 'base', why: 'tests: the default program of the PTY test harnesses' },
  find: { debianPackage: 'findutils', step: 'base', why: 'image build: initramfs file list, clamping times in the debian root' },
  getent: { debianPackage: 'libc-bin', step: 'base', why: "the agent resolves a command's user; host prepare finds the kvm group" },
  gzip: { debianPackage: 'gzip', step: 'base', why: 'image build: unpacks a gzip-compressed kernel (extractVmlinux)' },
  id: { debianPackage: 'coreutils', step: 'base', why: 'qemu hosts: the libvirt-qemu user that must read fw_cfg files' },
  ldd: { debianPackage: 'libc-bin', step: 'base', why: 'minimal image: the libraries of node, tmux and git' },
  mke2fs: { debianPackage: 'e2fsprogs', step: 'base', why: 'image build: the ext4 disk (mke2fs -d, no mount)' },
  mkdir: { debianPackage: 'coreutils', step: 'base', why: 'tests: git-clone fixtures; the guest push script' },
  mkfifo: { debianPackage: 'coreutils', step: 'base', why: 'tests: a FIFO the storage routes must refuse' },
  mount: { debianPackage: 'mount', step: 'base', why: 'debian image: proc, sysfs, devpts inside the private namespace' },
  mv: { debianPackage: 'coreutils', step: 'base', why: 'screen and native sessions: the screenrc and pid files are written atomically' },
  rm: { debianPackage: 'coreutils', step: 'base', why: 'native sessions: stale pid files (the kill and start scripts)' },
  sed: { debianPackage: 'sed', step: 'base', why: 'the session kill script reads process states' },
  sh: { debianPackage: 'dash', step: 'base', why: 'the session kill script, the guest workspace push, the chroot wrapper, tests' },
  sleep: { debianPackage: 'coreutils', step: 'base', why: 'the session kill script; tests (fake coding agent)' },
  tar: { debianPackage: 'tar', step: 'base', why: 'task workspaces and outboxes stream to and from guests' },
  touch: { debianPackage: 'coreutils', step: 'base', why: 'debian image: clamps times (run by find -exec)' },
  true: { debianPackage: 'coreutils', step: 'base', why: 'set-up: `sudo -n true` tells whether sudo works without a password' },
  unshare: { debianPackage: 'util-linux', step: 'base', why: 'debian image: debootstrap and chroot commands in a private mount namespace' },
  setpriv: {
    debianPackage: 'util-linux',
    step: 'base',
    why: "tests: PostgreSQL runs as the postgres user when the tests run as root, and dies with the test's process",
  },
  useradd: { debianPackage: 'passwd', step: 'base', why: "debian image: the guest's agent user (inside the root)" },

  node: {
    debianPackage: null,
    step: 'given',
    why: "everything (process.execPath): Node 20 from NodeSource's nodejs package, nvm or similar; Debian 12's nodejs is 18",
  },
  npm: { debianPackage: null, step: 'given', why: 'set-up (npm ci, the build); image build lists production packages; comes with Node 20' },
  sudo: {
    debianPackage: 'sudo',
    step: 'given',
    why: 'set-up installs with `sudo -n` when not root; without it, it prints the apt-get line',
  },

  cc: { debianPackage: 'gcc', step: 'start', why: "npm ci: make's C compiler for the native addons (sqlite3.c of better-sqlite3)" },
  git: {
    debianPackage: 'git',
    step: 'start',
    why: 'task workspaces are shallow clones; the minimal image copies it; tests make repositories',
  },
  'g++': { debianPackage: 'g++', step: 'start', why: 'npm ci: node-gyp compiles better-sqlite3, node-pty and the libvirt binding' },
  make: { debianPackage: 'make', step: 'start', why: 'npm ci: node-gyp builds the native addons with make' },
  pgrep: { debianPackage: 'procps', step: 'start', why: "the session kill script finds the panes' processes; tests" },
  pkill: { debianPackage: 'procps', step: 'start', why: "the session kill script signals the panes' processes" },
  ps: { debianPackage: 'procps', step: 'start', why: 'real-VM tests look for leftover QEMU processes' },
  python3: { debianPackage: 'python3', step: 'start', why: 'npm ci: node-gyp is a Python program' },
  ssh: {
    debianPackage: 'openssh-client',
    step: 'start',
    why: '`sbx ssh` runs the system ssh with sbx ssh-proxy as its ProxyCommand; the SSH connector tests',
  },
  screen: {
    debianPackage: 'screen',
    step: 'start',
    why: 'screen/managed sessions of local agents (pty-ws.v1 joins); the debian image installs it; tests',
  },
  'ssh-keygen': {
    debianPackage: 'openssh-client',
    step: 'start',
    why:
      "SSH leases: signs lease keys into user certificates with SVC_GATEWAY_SSH_CA_KEY (ssh-keygen -s); local VMs' sshd host keys; " +
      'tests make CA and user keys and read certificates and fingerprints',
  },
  tmux: { debianPackage: 'tmux', step: 'start', why: 'managed sessions of local agents; the minimal image copies it' },
  virsh: {
    debianPackage: 'libvirt-clients',
    step: 'start',
    alsoIn: ['host'],
    why: '`virsh event` on daemon URIs; host prepare defines the network; checkpoint restores on qemu hosts (save-image-dumpxml, restore --xml)',
  },

  chromium: { debianPackage: 'chromium', step: 'test', why: 'headless dashboard tests and the dashboard benchmark' },
  libvirtd: {
    debianPackage: 'libvirt-daemon',
    step: 'test',
    alsoIn: ['host'],
    why: 'daemon-backed hypervisor tests (test+unix:// URIs); host prepare starts it',
  },
  openssl: { debianPackage: 'openssl', step: 'test', why: 'identity tests read the issued certificates with openssl' },
  scp: { debianPackage: 'openssh-client', step: 'test', why: 'the SSH connector test copies 50 MB through the connector' },
  sshd: {
    debianPackage: 'openssh-server',
    step: 'test',
    why:
      "tests: the real sshd behind the SSH connector; local VMs' sshd with SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH " +
      '(install openssh-server yourself for that: on a systemd host the package also starts a system sshd on port 22)',
  },
  promtool: { debianPackage: 'prometheus', step: 'test', why: 'checks the /metrics exposition' },
  initdb: {
    debianPackage: 'postgresql',
    step: 'test',
    versionedIn: '/usr/lib/postgresql',
    why: "the activity store's PostgreSQL contract run: a data directory in a temporary folder (test/support/postgres.ts)",
  },
  postgres: {
    debianPackage: 'postgresql',
    step: 'test',
    versionedIn: '/usr/lib/postgresql',
    why: "the activity store's PostgreSQL contract run: the server, on a loopback port (test/support/postgres.ts)",
  },

  cpio: { debianPackage: 'cpio', step: 'image', kinds: ['minimal'], why: 'minimal image: packs the initramfs' },
  debootstrap: { debianPackage: 'debootstrap', step: 'image', kinds: ['debian'], why: 'debian image: the minbase root' },
  lz4: {
    debianPackage: 'lz4',
    step: 'image',
    why: 'unpacks an lz4-compressed kernel (extractVmlinux; no image boots one today, a kernel of another build may be one)',
  },
  xz: { debianPackage: 'xz-utils', step: 'image', why: 'unpacks an xz-compressed kernel (extractVmlinux)' },
  zstd: { debianPackage: 'zstd', step: 'image', why: 'unpacks a zstd-compressed kernel (extractVmlinux)' },

  dnsmasq: { debianPackage: 'dnsmasq-base', step: 'host', why: "libvirtd's network driver runs it for DNS/DHCP of libvirt networks" },
  ip: {
    debianPackage: 'iproute2',
    step: 'host',
    why: 'removing a network also deletes a bridge a dead libvirtd left behind; the real-VM test harness lists the host addresses to pick a free /24 for its network',
  },
  iptables: { debianPackage: 'iptables', step: 'host', why: "libvirtd adds the isolated network's REJECT rules" },
  'qemu-img': {
    debianPackage: 'qemu-utils',
    step: 'test',
    alsoIn: ['host'],
    why: "the server makes each VM's qcow2 overlay (and a restored checkpoint's fresh one); the qemu provisioning unit tests (SSH fw_cfg files); the debian-image test",
  },
  'qemu-system-x86_64': {
    debianPackage: 'qemu-system-x86',
    step: 'host',
    why: 'libvirtd runs every VM in it; the debian-image test boots it directly',
  },
  virtlogd: { debianPackage: 'libvirt-daemon', step: 'host', why: "host prepare starts it: libvirtd logs QEMU's output through it" },

  busybox: {
    debianPackage: 'busybox-static',
    step: 'guest',
    why: "minimal image: downloaded (apt-get download), its applet list read from the unpacked package, the guest's userland; a restored checkpoint's agent runs its hwclock",
  },
  systemctl: {
    debianPackage: 'systemd',
    step: 'guest',
    why: "debian image: enables units in the root; host prepare runs the host's only when PID 1 is systemd",
  },
  'update-initramfs': { debianPackage: 'initramfs-tools', step: 'guest', why: 'debian image: makes the initrd inside the root' },
});

/**
 * Packages no spawned program stands for (headers, configuration), installed by a step all the
 * same; a step checks them with dpkg instead of on PATH.
 * @type {Readonly<Record<string, {step: Step, why: string}>>}
 */
export const PACKAGES_WITHOUT_PROGRAM = Object.freeze({
  'libvirt-dev': { step: 'start', why: 'headers and libvirt.so that npm ci compiles the libvirt binding against' },
  'libvirt-daemon-system': { step: 'host', why: "the system libvirtd's configuration, the libvirt-qemu user and the default networks" },
});

/**
 * @param {Program} p
 * @param {Step} step
 * @param {ImageKind} [kind]
 */
function inStep(p, step, kind) {
  if (p.step !== step && !(p.alsoIn ?? []).includes(step)) return false;
  return kind === undefined || p.kinds === undefined || p.kinds.includes(kind);
}

/**
 * Programs a step installs (sorted); with `kind`, only those that image kind needs.
 * @param {Step} step
 * @param {ImageKind} [kind]
 * @returns {string[]}
 */
export function programsForStep(step, kind) {
  return Object.keys(PROGRAMS)
    .filter((name) => inStep(/** @type {Program} */ (PROGRAMS[name]), step, kind))
    .sort();
}

/**
 * Debian packages of a step (sorted, unique): its programs' and its packages without a program.
 * @param {Step} step
 * @param {ImageKind} [kind]
 * @returns {string[]}
 */
export function packagesForStep(step, kind) {
  const own = Object.keys(PACKAGES_WITHOUT_PROGRAM).filter((p) => PACKAGES_WITHOUT_PROGRAM[p]?.step === step);
  return [...new Set([...packagesOf(programsForStep(step, kind)), ...own])].sort();
}

/**
 * The Debian packages of some programs (sorted, unique; programs without one or not listed are skipped).
 * @param {readonly string[]} programs
 * @returns {string[]}
 */
export function packagesOf(programs) {
  /** @type {Set<string>} */
  const out = new Set();
  for (const name of programs) {
    const pkg = PROGRAMS[name]?.debianPackage;
    if (typeof pkg === 'string') out.add(pkg);
  }
  return [...out].sort();
}

/**
 * Folders searched for a program: PATH, then where Debian puts programs (daemons live in sbin,
 * which a user's PATH may lack).
 */
function searchDirs() {
  const debian = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
  return [...(process.env['PATH'] ?? '').split(':').filter((d) => d.startsWith('/')), ...debian];
}

/**
 * Where a program of the table is here, or undefined: in the newest `<versionedIn>/<version>/bin`
 * that has it when the entry says so (never on PATH: a symlink there is not what the package
 * installs), else the first of PATH and Debian's program folders that has it.
 * @param {string} name
 * @returns {string | undefined}
 */
export function findProgram(name) {
  const under = PROGRAMS[name]?.versionedIn;
  if (under === undefined)
    return searchDirs()
      .map((d) => `${d}/${name}`)
      .find((p) => existsSync(p));
  /** @type {string[]} */
  let versions;
  try {
    versions = readdirSync(under).filter((v) => /^\d+(\.\d+)*$/.test(v));
  } catch {
    return undefined; // the package is not installed
  }
  const newestFirst = versions.sort((a, b) => b.localeCompare(a, 'en', { numeric: true }));
  return newestFirst.map((v) => `${under}/${v}/bin/${name}`).find((p) => existsSync(p));
}

/**
 * Programs of a step that are not installed here (sorted).
 * @param {Step} step
 * @param {ImageKind} [kind]
 * @returns {string[]}
 */
export function missingPrograms(step, kind) {
  return programsForStep(step, kind).filter((name) => findProgram(name) === undefined);
}

/**
 * What a step must install here (sorted): the packages of its missing programs, and its packages
 * without a program that dpkg does not list as installed.
 * @param {Step} step
 * @param {ImageKind} [kind]
 * @returns {string[]}
 */
export function missingPackages(step, kind) {
  const own = Object.keys(PACKAGES_WITHOUT_PROGRAM).filter((p) => PACKAGES_WITHOUT_PROGRAM[p]?.step === step && !debInstalled(p));
  return [...new Set([...packagesOf(missingPrograms(step, kind)), ...own])].sort();
}

/** @param {string} pkg */
function debInstalled(pkg) {
  const r = spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return r.status === 0 && r.stdout.includes('install ok installed');
}

/**
 * The one line that installs packages by hand.
 * @param {readonly string[]} packages
 */
export function aptInstallLine(packages) {
  return `apt-get install -y --no-install-recommends ${packages.join(' ')}`;
}

/**
 * README's table: per step, who installs it and its packages (with their programs).
 * @returns {string}
 */
export function programsMarkdownTable() {
  const rows = ['| Step | Installed by | Debian packages (programs) |', '|---|---|---|'];
  for (const step of /** @type {Step[]} */ (Object.keys(STEPS))) {
    /** @type {Map<string, string[]>} */
    const byPackage = new Map();
    /** @type {string[]} */
    const notDebian = [];
    for (const name of programsForStep(step)) {
      const pkg = PROGRAMS[name]?.debianPackage;
      if (typeof pkg === 'string') byPackage.set(pkg, [...(byPackage.get(pkg) ?? []), name]);
      else notDebian.push(name);
    }
    for (const pkg of Object.keys(PACKAGES_WITHOUT_PROGRAM)) if (PACKAGES_WITHOUT_PROGRAM[pkg]?.step === step) byPackage.set(pkg, []);
    const cells = [...byPackage]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([pkg, names]) => (names.length === 0 ? `\`${pkg}\`` : `\`${pkg}\` (${names.join(', ')})`));
    if (notDebian.length > 0) cells.unshift(`${notDebian.join(', ')} (not from Debian)`);
    rows.push(`| ${step} | ${STEPS[step]} | ${cells.join(', ')} |`);
  }
  return rows.join('\n');
}
