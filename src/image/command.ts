/**
 * `sandboxd image build [--kind minimal|debian] [--out DIR]`: builds the guest image qemu VMs boot,
 * `minimal` (busybox init, the fast test image: build-minimal.ts) or `debian` (debootstrap root
 * with systemd and cloud-init, production-like: build-debian.ts, needs root). Prints the image
 * folder; SVC_VM_BASE_IMAGE is `<that folder>/disk.ext4`.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildDebianImage } from './build-debian.js';
import { buildMinimalImage } from './build-minimal.js';

export interface CommandIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export const IMAGE_USAGE = `usage: sandboxd image build [--kind minimal|debian] [--out DIR]

  --kind  minimal (default): Debian kernel (PVH vmlinux) + busybox initramfs + ext4 disk with
          node and the sandbox-agent bundle; boots to a connected agent in seconds under TCG
          (native-bench vm-real measures it).
          debian: Debian bookworm root (debootstrap) with systemd, cloud-init, the cloud
          kernel and Debian's initramfs, tmux, git, node and sandbox-agent (sandbox-agent.service);
          production-like, needs root; boots to a connected agent in about 20-30 s under TCG.
  --out   output root (default ./images); the image goes to <out>/<kind>-<hash>/ and is reused
          while its inputs are unchanged. Then set SVC_VM_BASE_IMAGE=<that folder>/disk.ext4.

  The host tools a build needs (cpio, debootstrap, the kernel's decompressor: the image step of
  src/setup/programs.mjs) are installed with apt-get when run as root; otherwise a missing one
  stops the build with the apt-get line that installs it.
`;

/** The compiled tree this module runs from (holds src/bin/sandbox-agent.js). */
export function defaultAgentTree(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
}

/** The nearest folder above `from` with a package.json (its node_modules are copied). */
export function findPackageRoot(from: string): string {
  let d = resolve(from);
  for (;;) {
    if (existsSync(join(d, 'package.json'))) return d;
    const up = dirname(d);
    if (up === d) throw new Error(`no package.json above ${from}`);
    d = up;
  }
}

/** Image kinds `image build` makes. */
export type ImageKind = 'minimal' | 'debian';

/** `image build` options (after `build`): kind (default minimal) and out (default ./images, made absolute), or what is wrong. */
export function parseBuildArgs(rest: readonly string[]): { kind: ImageKind; out: string } | { error: string } {
  let kind = 'minimal';
  let out = resolve('images');
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i] ?? '';
    const [flag, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const value = inline ?? rest[++i];
    if (flag === '--kind' && value !== undefined) kind = value;
    else if (flag === '--out' && value !== undefined) out = resolve(value);
    else return { error: `unexpected argument '${a}'` };
  }
  if (kind !== 'minimal' && kind !== 'debian') return { error: `--kind must be minimal or debian, not '${kind}'` };
  return { kind, out };
}

/** Runs the image subcommand; resolves to the exit code (0 ok, 1 failed, 2 usage). */
export async function runImageCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
    io.stdout(IMAGE_USAGE);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== 'build') {
    io.stderr(`sandboxd image: unknown subcommand '${sub}'\n${IMAGE_USAGE}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.stdout(IMAGE_USAGE);
    return 0;
  }
  const args = parseBuildArgs(rest);
  if ('error' in args) {
    io.stderr(`sandboxd image build: ${args.error}\n${IMAGE_USAGE}`);
    return 2;
  }
  const { kind, out } = args;
  // Checked here too so the refusal is a usage answer, not a failed build.
  if (kind === 'debian' && process.getuid?.() !== 0) {
    io.stderr(
      'sandboxd image build: --kind debian needs root (debootstrap, chroot, file ownership); run it as root, or use --kind minimal\n',
    );
    return 2;
  }
  try {
    const tree = defaultAgentTree();
    const opts = { outDir: out, agentTree: tree, packageRoot: findPackageRoot(tree), log: (l: string) => io.stderr(`${l}\n`) };
    const r = kind === 'debian' ? await buildDebianImage(opts) : await buildMinimalImage(opts);
    io.stderr(`${r.reused ? 'reused' : 'built'} in ${(r.elapsedMs / 1000).toFixed(1)} s\n`);
    io.stdout(`${r.dir}\n`);
    return 0;
  } catch (err) {
    io.stderr(`sandboxd image build failed: ${(err as Error).message}\n`);
    return 1;
  }
}
