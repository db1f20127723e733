/**
 * File operations inside one storage area that never leave it, whatever the guest (which has
 * the inbox and outbox mounted read-write) puts there or swaps in meanwhile.
 *
 * The walk is openat-style: the area's directory is opened, then each segment is opened
 * relative to the directory opened before it, through the descriptor's /proc/self/fd/<fd>/<name>
 * path (the kernel resolves it from the open directory itself, not from a path a guest could
 * have changed), with O_NOFOLLOW | O_DIRECTORY. A symlink anywhere on the way, final name
 * included, is refused (400 `storage.invalid_path`), never followed, even when it points inside
 * the area: the scoped API has no use for them, and a link that is harmless now can be re-aimed
 * after the check. A directory swapped for a symlink after it was opened changes nothing: we
 * already hold the directory. Creates, renames and unlinks go through the parent's descriptor
 * the same way, so a write lands in the directory that was checked or nowhere.
 *
 * Writes are atomic: a temp file `.sbx-tmp-<random>` in the target directory (O_CREAT | O_EXCL |
 * O_NOFOLLOW), written and fsynced, then renamed over the target; any failure unlinks it, so a
 * refused or failed write leaves nothing behind. Listings hide these temp names.
 */
import { randomBytes } from 'node:crypto';
import { constants as fsc, type BigIntStats } from 'node:fs';
import { lstat, mkdir, open, readdir, readlink, realpath, rename, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { SvcError } from '../core/errors.js';
import { fromDiskName, toDiskName } from './scoped-path.js';

/** Prefix of in-flight upload files (hidden from listings, never a valid target). */
export const TEMP_PREFIX = '.sbx-tmp-';

const DIR_FLAGS = fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW;
const READ_FLAGS = fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK;
const TEMP_FLAGS = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW;

/** Metadata of one entry (what listings show; never contents). */
export interface EntryMeta {
  /** The API name (a `/` inside a name is shown as `/`). */
  readonly name: string;
  readonly kind: 'file' | 'dir' | 'symlink' | 'other';
  readonly sizeBytes: number;
  readonly modifiedMs: number;
  /** Permission bits (st_mode & 0o7777). */
  readonly mode: number;
}

/** What is at a path now: nothing, or a file system object with its ETag. */
export type Current =
  | { readonly exists: false }
  | { readonly exists: true; readonly kind: EntryMeta['kind']; readonly etag: string; readonly sizeBytes: number };

function errCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? ((err as { code?: unknown }).code as string | undefined) : undefined;
}

function invalid(message: string): SvcError {
  return new SvcError('storage.invalid_path', message);
}

/** File system errors of a lookup as the client sees them. */
function mapLookup(err: unknown): SvcError {
  if (err instanceof SvcError) return err;
  const code = errCode(err);
  if (code === 'ELOOP') return invalid('the path runs through a symlink (symlinks in storage areas are never followed)');
  if (code === 'ENOENT') return new SvcError('storage.not_found', 'no such file or directory');
  if (code === 'ENOTDIR') return new SvcError('storage.not_found', 'a parent on the path is not a directory');
  if (code === 'ENAMETOOLONG') return invalid('the path is too long');
  if (code === 'EACCES' || code === 'EPERM') return new SvcError('storage.not_found', 'no such file or directory');
  return new SvcError('server.internal', 'storage lookup failed');
}

/** `/proc/self/fd/<fd>/<name>`: `name` resolved inside the open directory `dir`. */
function at(dir: FileHandle, diskName?: string): string {
  return diskName === undefined ? `/proc/self/fd/${dir.fd}` : `/proc/self/fd/${dir.fd}/${diskName}`;
}

function kindOf(st: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }): EntryMeta['kind'] {
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isDirectory()) return 'dir';
  return st.isFile() ? 'file' : 'other';
}

/** A strong ETag from identity, size and change time: any write through any path changes it. */
export function etagOf(st: BigIntStats): string {
  return `"${st.ino.toString(36)}-${st.size.toString(36)}-${st.mtimeNs.toString(36)}-${st.ctimeNs.toString(36)}"`;
}

/** One area directory (`<root>/global`, `<root>/inbox/<agent>`, `<root>/outbox/<task>`). */
export class AreaFs {
  readonly #container: string;
  readonly #relArea: readonly string[];

  /**
   * @param container the storage root (trusted: operator configuration; it may be a symlink).
   * @param relArea the area's segments below it (`['inbox', 'agent-1']`), each opened with O_NOFOLLOW.
   */
  constructor(container: string, relArea: readonly string[]) {
    this.#container = container;
    this.#relArea = relArea;
  }

  /** Open the area directory; `create` makes it (and its parents below the root) when missing. */
  async #openArea(create: boolean): Promise<FileHandle> {
    let dir: FileHandle;
    try {
      dir = await open(await realpath(this.#container), DIR_FLAGS);
    } catch (err) {
      if (!create || errCode(err) !== 'ENOENT') throw mapLookup(err);
      await mkdir(this.#container, { recursive: true, mode: 0o755 });
      dir = await open(await realpath(this.#container), DIR_FLAGS);
    }
    try {
      for (const seg of this.#relArea) dir = await this.#step(dir, seg, create);
      await checkProc(dir);
      return dir;
    } catch (err) {
      await dir.close().catch(() => undefined);
      throw err;
    }
  }

  /** Open `diskName` below `dir` as a directory (closing `dir`); `create` makes it when missing. */
  async #step(dir: FileHandle, diskName: string, create: boolean): Promise<FileHandle> {
    try {
      try {
        return await open(at(dir, diskName), DIR_FLAGS);
      } catch (err) {
        if (!create || errCode(err) !== 'ENOENT') throw err;
        await mkdir(at(dir, diskName), { mode: 0o775 }).catch((e: unknown) => {
          if (errCode(e) !== 'EEXIST') throw e;
        });
        return await open(at(dir, diskName), DIR_FLAGS);
      }
    } catch (err) {
      const code = errCode(err);
      if (code === 'ENOTDIR' || code === 'ELOOP') {
        // O_NOFOLLOW | O_DIRECTORY on a symlink fails with ENOTDIR or ELOOP: tell the two apart.
        const st = await lstat(at(dir, diskName)).catch(() => null);
        if (st?.isSymbolicLink() === true) throw invalid('the path runs through a symlink (symlinks in storage areas are never followed)');
        throw new SvcError('storage.not_found', 'a parent on the path is not a directory');
      }
      throw mapLookup(err);
    } finally {
      await dir.close().catch(() => undefined);
    }
  }

  /** Open the directory at `names` (API names). */
  async openDir(names: readonly string[], create = false): Promise<FileHandle> {
    let dir = await this.#openArea(create);
    for (const name of names) dir = await this.#step(dir, toDiskName(name), create);
    return dir;
  }

  /** What is at `names` now (never following a symlink). */
  async current(names: readonly string[]): Promise<Current> {
    const parent = await this.#parentOrNull(names);
    if (parent === null) return { exists: false };
    try {
      const st = await lstat(at(parent, toDiskName(last(names))), { bigint: true });
      return { exists: true, kind: kindOf(st), etag: etagOf(st), sizeBytes: Number(st.size) };
    } catch (err) {
      if (errCode(err) === 'ENOENT') return { exists: false };
      throw mapLookup(err);
    } finally {
      await parent.close();
    }
  }

  /** Metadata of the entry at `names` (never following a symlink); 404 when it does not exist. */
  async entry(names: readonly string[]): Promise<EntryMeta> {
    const parent = await this.openDir(names.slice(0, -1));
    try {
      const st = await lstat(at(parent, toDiskName(last(names))));
      return {
        name: last(names),
        kind: kindOf(st),
        sizeBytes: st.isDirectory() ? 0 : st.size,
        modifiedMs: st.mtimeMs,
        mode: st.mode & 0o7777,
      };
    } catch (err) {
      throw mapLookup(err);
    } finally {
      await parent.close();
    }
  }

  /** The parent directory, or null when a parent does not exist yet (a write creates it). */
  async #parentOrNull(names: readonly string[]): Promise<FileHandle | null> {
    try {
      return await this.openDir(names.slice(0, -1));
    } catch (err) {
      if (err instanceof SvcError && err.code === 'storage.not_found') return null;
      throw err;
    }
  }

  /**
   * Entries of the directory at `names`, sorted by name, after `afterName` (the cursor), at most
   * `limit`. Metadata only. 400 when `names` is a file or runs through a symlink.
   */
  async list(names: readonly string[], afterName: string | null, limit: number): Promise<{ entries: EntryMeta[]; hasMore: boolean }> {
    const dir = await this.openDir(names);
    try {
      const all = (await readdir(at(dir)))
        .filter((n) => !n.startsWith(TEMP_PREFIX))
        .map((disk) => ({ disk, name: fromDiskName(disk) }))
        .filter((e) => afterName === null || e.name > afterName)
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const page = all.slice(0, limit);
      const entries: EntryMeta[] = [];
      for (const e of page) {
        try {
          const st = await lstat(at(dir, e.disk));
          entries.push({
            name: e.name,
            kind: kindOf(st),
            sizeBytes: st.isDirectory() ? 0 : st.size,
            modifiedMs: st.mtimeMs,
            mode: st.mode & 0o7777,
          });
        } catch (err) {
          if (errCode(err) !== 'ENOENT') throw mapLookup(err); // removed meanwhile: skipped
        }
      }
      return { entries, hasMore: all.length > limit };
    } finally {
      await dir.close();
    }
  }

  /**
   * Open the regular file at `names` for reading (O_NOFOLLOW, relative to its checked parent).
   * The caller closes the handle. 400 for a symlink, a directory or anything but a file.
   */
  async openFile(names: readonly string[]): Promise<{ fh: FileHandle; st: BigIntStats }> {
    const parent = await this.openDir(names.slice(0, -1));
    let fh: FileHandle;
    try {
      fh = await open(at(parent, toDiskName(last(names))), READ_FLAGS);
    } catch (err) {
      if (errCode(err) === 'EISDIR') throw invalid('the path names a directory, not a file');
      throw mapLookup(err);
    } finally {
      await parent.close();
    }
    try {
      const st = await fh.stat({ bigint: true });
      if (st.isDirectory()) throw invalid('the path names a directory, not a file');
      if (!st.isFile()) throw invalid('the path names something that is not a regular file');
      return { fh, st };
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  /**
   * Atomically replace (or create) the file at `names` with `bytes`, after `check(current)`
   * accepted what is there now; parents are created. Nothing is left behind on failure.
   * Resolves to the new ETag.
   */
  async writeFile(names: readonly string[], bytes: Uint8Array, check: (current: Current) => void | Promise<void>): Promise<string> {
    const parent = await this.openDir(names.slice(0, -1), true);
    const disk = toDiskName(last(names));
    const tmp = `${TEMP_PREFIX}${randomBytes(9).toString('base64url')}`;
    let created = false;
    try {
      let cur: Current;
      try {
        const st = await lstat(at(parent, disk), { bigint: true });
        cur = { exists: true, kind: kindOf(st), etag: etagOf(st), sizeBytes: Number(st.size) };
      } catch (err) {
        if (errCode(err) !== 'ENOENT') throw mapLookup(err);
        cur = { exists: false };
      }
      if (cur.exists && cur.kind === 'symlink')
        throw invalid('the path is a symlink (symlinks in storage areas are never followed or replaced)');
      if (cur.exists && cur.kind !== 'file') throw new SvcError('storage.not_a_file', 'the path names a directory or a special file');
      await check(cur);
      const fh = await open(at(parent, tmp), TEMP_FLAGS, 0o664);
      created = true;
      try {
        let off = 0;
        while (off < bytes.byteLength) off += (await fh.write(bytes, off, bytes.byteLength - off)).bytesWritten;
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(at(parent, tmp), at(parent, disk));
      created = false;
      const st = await lstat(at(parent, disk), { bigint: true });
      return etagOf(st);
    } catch (err) {
      if (created) await unlink(at(parent, tmp)).catch(() => undefined);
      throw err instanceof SvcError ? err : mapWrite(err);
    } finally {
      await parent.close();
    }
  }

  /** Remove the file, symlink (the link itself) or empty directory at `names`, after `check(current)`. */
  async remove(names: readonly string[], check: (current: Current & { exists: true }) => void | Promise<void>): Promise<void> {
    const parent = await this.openDir(names.slice(0, -1));
    const disk = toDiskName(last(names));
    try {
      let st: BigIntStats;
      try {
        st = await lstat(at(parent, disk), { bigint: true });
      } catch (err) {
        throw mapLookup(err);
      }
      const cur = { exists: true as const, kind: kindOf(st), etag: etagOf(st), sizeBytes: Number(st.size) };
      await check(cur);
      try {
        if (cur.kind === 'dir') await rmdir(at(parent, disk));
        else await unlink(at(parent, disk));
      } catch (err) {
        const code = errCode(err);
        if (code === 'ENOTEMPTY' || code === 'EEXIST') throw new SvcError('storage.not_empty', 'the directory is not empty');
        throw mapLookup(err);
      }
    } finally {
      await parent.close();
    }
  }
}

function mapWrite(err: unknown): SvcError {
  const code = errCode(err);
  if (code === 'ENOSPC' || code === 'EDQUOT') return new SvcError('storage.quota_exceeded', 'the storage volume is full');
  if (code === 'EISDIR') return new SvcError('storage.not_a_file', 'the path names a directory');
  return mapLookup(err);
}

function last(names: readonly string[]): string {
  const n = names[names.length - 1];
  if (n === undefined) throw invalid('an object path is required');
  return n;
}

/** The walk resolves names through /proc/self/fd: refuse clearly where /proc is not mounted. */
async function checkProc(dir: FileHandle): Promise<void> {
  try {
    await readlink(at(dir));
  } catch {
    throw new SvcError('server.unavailable', 'scoped storage needs /proc (Linux)');
  }
}
