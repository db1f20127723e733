/**
 * Helpers the image builders share: digests of the inputs (cache key), the agent bundle with its
 * V8 code cache (agent-bundle.ts, agent-loader.ts), apt version look-ups, and the kernel payload
 * of a bzImage (for QEMU's PVH entry, which skips in-guest decompression under TCG).
 *
 * build-minimal.ts has private copies of some of these (it predates this file).
 */
import { createHash, type Hash } from 'node:crypto';
import { chmod, cp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { ensureAgentBundle } from './agent-bundle.js';
import { run } from './run.js';

/** Regular files under `dir`, sorted (stable hash order). */
export async function listFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) if (e.isFile()) out.push(join(e.parentPath, e.name));
  return out.sort();
}

/** sha256 (hex) of a file's bytes. */
export async function fileDigest(p: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(p))
    .digest('hex');
}

export async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

/** Feeds every file of a tree (relative name and bytes, sorted) into `h`; source maps are skipped like in the copy. */
export async function hashTree(h: Hash, root: string, sub: string): Promise<void> {
  if (!(await exists(join(root, sub)))) return;
  for (const f of await listFiles(join(root, sub))) {
    if (f.endsWith('.map')) continue;
    h.update(`${relative(root, f)}\n`).update(await readFile(f));
  }
}

/**
 * The agent as images ship it (agent-bundle.ts): the current bundle for `agentTree` and its key
 * (the digest of everything it was made from: part of an image's cache key).
 */
export async function agentBundleFor(agentTree: string, packageRoot: string): Promise<{ dir: string; key: string }> {
  const b = await ensureAgentBundle({ agentTree, packageRoot });
  return { dir: b.dir, key: b.manifest.key };
}

/**
 * Installs the agent bundle at `dest` (the guest runs `<dest>/src/bin/sandbox-agent.js`) and
 * makes its V8 code cache with `nodePath`, the node binary the image ships (V8 accepts a cache
 * only from the same version and flags). Returns the cache's size in bytes.
 */
export async function installAgent(dest: string, bundleDir: string, nodePath: string): Promise<number> {
  await cp(bundleDir, dest, { recursive: true });
  const loader = join(dest, 'src', 'bin', 'sandbox-agent.js');
  const out = await run(nodePath, ['-e', `process.stdout.write(String(require(${JSON.stringify(loader)}).makeCodeCache()))`], {
    timeoutMs: 120_000,
  });
  const bytes = Number(out.toString());
  if (!(bytes > 0)) throw new Error(`making the agent's code cache printed '${out.toString().slice(0, 200)}'`);
  return bytes;
}

/** apt's candidate version of `pkg` (host index); rejects when there is none. */
export async function candidateVersion(pkg: string): Promise<string> {
  const out = (await run('apt-cache', ['policy', pkg])).toString();
  const m = /Candidate:\s*(\S+)/.exec(out);
  if (m?.[1] === undefined || m[1] === '(none)') throw new Error(`apt has no candidate for ${pkg} (run apt-get update?)`);
  return m[1];
}

/** A stable UUID from a hash (filesystem UUID and hash seed: keeps a disk reproducible). */
export function uuidFrom(hash: string): string {
  const x = createHash('sha256').update(hash).digest('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-4${x.slice(13, 16)}-8${x.slice(17, 20)}-${x.slice(20, 32)}`;
}

/** Compression of a bzImage payload, by its magic bytes. */
export type PayloadCodec = 'gzip' | 'xz' | 'zstd' | 'lz4';

/**
 * Where the compressed kernel sits inside a bzImage, from its setup header (boot protocol
 * 2.08+: payload_offset at 0x248, payload_length at 0x24c, relative to the protected-mode code
 * that starts after (setup_sects + 1) sectors). The payload ends with the 4-byte little-endian
 * size of the uncompressed vmlinux (the kernel build's size_append), excluded here.
 */
export function bzImagePayload(image: Buffer): { data: Buffer; codec: PayloadCodec; uncompressedBytes: number } {
  if (image.length < 0x250 || image.readUInt32LE(0x202) !== 0x53726448) throw new Error('not a bzImage (no HdrS setup header)');
  const setupSects = image.readUInt8(0x1f1) === 0 ? 4 : image.readUInt8(0x1f1);
  const start = (setupSects + 1) * 512 + image.readUInt32LE(0x248);
  const length = image.readUInt32LE(0x24c);
  if (length < 8 || start + length > image.length) throw new Error('bzImage payload is out of bounds');
  const payload = image.subarray(start, start + length);
  const magic = payload.subarray(0, 6).toString('hex');
  const codec: PayloadCodec | undefined = magic.startsWith('1f8b')
    ? 'gzip'
    : magic === 'fd377a585a00'
      ? 'xz'
      : magic.startsWith('28b52ffd')
        ? 'zstd'
        : magic.startsWith('02214c18')
          ? 'lz4'
          : undefined;
  if (codec === undefined) throw new Error(`bzImage payload has an unknown compression (magic ${magic})`);
  return { data: payload.subarray(0, length - 4), codec, uncompressedBytes: payload.readUInt32LE(length - 4) };
}

/** The uncompressed ELF vmlinux of a bzImage (host tools gzip/xz/zstd/lz4 decompress it). */
export async function extractVmlinux(vmlinuz: string): Promise<Buffer> {
  const p = bzImagePayload(await readFile(vmlinuz));
  const tool: Record<PayloadCodec, [string, string[]]> = {
    gzip: ['gzip', ['-dc']],
    xz: ['xz', ['-dc', '--single-stream']],
    zstd: ['zstd', ['-dcq']],
    lz4: ['lz4', ['-dc']],
  };
  const [cmd, args] = tool[p.codec];
  const out = await run(cmd, args, { input: p.data, maxBuffer: 512 * 1024 * 1024, timeoutMs: 120_000 });
  if (out.subarray(0, 4).toString('latin1') !== '\x7fELF') throw new Error('the decompressed kernel is not an ELF file');
  if (out.length !== p.uncompressedBytes)
    throw new Error(`the decompressed kernel has ${out.length} bytes, its header says ${p.uncompressedBytes}`);
  return out;
}

/**
 * A raw ext4 disk of `sizeMiB` (sparse) holding `root` (`mke2fs -d`, no mount). The UUID and the
 * directory hash seed come from the caller's input hash and E2FSPROGS_FAKE_TIME pins the
 * superblock's times, so the same inputs give the same filesystem identity.
 */
export async function makeExt4(
  root: string,
  out: string,
  o: { label: string; sizeMiB: number; uuid: string; hashSeed: string; fakeTime: number; timeoutMs: number },
): Promise<void> {
  await run(
    'env',
    [
      `E2FSPROGS_FAKE_TIME=${o.fakeTime}`,
      'mke2fs',
      '-q',
      '-F',
      '-t',
      'ext4',
      '-L',
      o.label,
      '-E',
      `root_owner=0:0,hash_seed=${o.hashSeed}`,
      '-U',
      o.uuid,
      '-d',
      root,
      out,
      `${o.sizeMiB}M`,
    ],
    { timeoutMs: o.timeoutMs },
  );
}

/**
 * Finishes a build made in `tmp`: writes manifest.json, makes the folder world-readable (guests'
 * QEMU runs as libvirt-qemu; an image holds no secret) and renames it to `dir` in one step, so a
 * half-built image is never found by its content hash.
 */
export async function publishImage(tmp: string, dir: string, manifest: object): Promise<void> {
  await writeFile(join(tmp, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await chmod(tmp, 0o755);
  await rm(dir, { recursive: true, force: true });
  await rename(tmp, dir);
}
