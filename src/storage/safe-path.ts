/**
 * Reading a file named by a client-supplied relative path without ever reading outside a root.
 *
 * Layers, each enough on its own for the common attacks:
 * 1. Syntax ({@link parseRelativePath}): non-empty, at most 4096 bytes and 64 segments of at most
 *    255 bytes; no NUL or other control characters, no backslash, not absolute, no empty, `.` or
 *    `..` segment. Query strings arrive percent-decoded, so `%2e%2e/` and `%00` are caught here.
 * 2. The walk ({@link resolveInRoot}): one segment at a time with lstat; a symlink is followed only
 *    when its target, first read lexically and then resolved with realpath, stays inside the
 *    root (so a symlinked file or a symlinked parent directory pointing out is refused, even
 *    when its target does not exist, without telling whether it does).
 * 3. The open ({@link openFileInRoot}): O_NOFOLLOW | O_NONBLOCK (a swapped-in symlink fails, a FIFO
 *    cannot hang the server), then the opened descriptor's real path (/proc/self/fd) is checked
 *    against the root again, which closes the race between the walk and the open. Only regular
 *    files are read; directories and devices are refused.
 */
import { constants as fsc } from 'node:fs';
import { lstat, open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import { SvcError } from '../core/errors.js';

/** Longest relative path accepted, in bytes of UTF-8. */
export const MAX_PATH_BYTES = 4096;
/** Most segments in a relative path. */
export const MAX_PATH_SEGMENTS = 64;
/** Longest segment, in bytes (the usual file system limit). */
export const MAX_SEGMENT_BYTES = 255;

// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const CONTROL_RE = /[\u0000-\u001f\u007f]/u;

function invalid(message: string): SvcError {
  return new SvcError('storage.invalid_path', message);
}

function notFound(): SvcError {
  return new SvcError('storage.not_found', 'no such file');
}

/** Validate a client path and split it into segments. Throws 400 `storage.invalid_path`. */
export function parseRelativePath(raw: string | undefined): string[] {
  if (raw === undefined || raw === '') throw invalid('query parameter path is required (a path relative to the storage root)');
  if (Buffer.byteLength(raw, 'utf8') > MAX_PATH_BYTES) throw invalid(`path is longer than ${MAX_PATH_BYTES} bytes`);
  if (raw.includes('\u0000')) throw invalid('path contains a NUL byte');
  if (CONTROL_RE.test(raw)) throw invalid('path contains a control character');
  if (raw.includes('\\')) throw invalid('path contains a backslash (use /)');
  if (raw.startsWith('/')) throw invalid('path must be relative (it starts with /)');
  const segments = raw.split('/');
  if (segments.length > MAX_PATH_SEGMENTS) throw invalid(`path has more than ${MAX_PATH_SEGMENTS} segments`);
  for (const seg of segments) {
    if (seg === '') throw invalid('path has an empty segment (// or a trailing /)');
    if (seg === '.' || seg === '..') throw invalid('path has a . or .. segment');
    if (Buffer.byteLength(seg, 'utf8') > MAX_SEGMENT_BYTES) throw invalid(`a path segment is longer than ${MAX_SEGMENT_BYTES} bytes`);
  }
  return segments;
}

/** True when `p` is `root` or below it (both absolute and normalized). */
export function isInside(root: string, p: string): boolean {
  if (p === root) return true;
  return p.startsWith(root.endsWith(sep) ? root : root + sep);
}

function errCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? ((err as { code?: unknown }).code as string | undefined) : undefined;
}

/** Map file system errors of a lookup to the client's view: missing → 404, loops → 400. Rejects. */
function lookupError(err: unknown): SvcError {
  const code = errCode(err);
  if (code === 'ENOENT' || code === 'ENOTDIR') return notFound();
  if (code === 'ELOOP') return invalid('path runs through a symlink loop');
  if (code === 'ENAMETOOLONG') return invalid('path is too long');
  if (code === 'EACCES' || code === 'EPERM') return notFound();
  return err instanceof SvcError ? err : new SvcError('server.internal', 'storage lookup failed');
}

/**
 * The real path of `segments` under `realRoot` (itself a realpath), following symlinks only
 * while they stay inside. Rejects with 400 `storage.invalid_path` or 404 `storage.not_found`.
 */
export async function resolveInRoot(realRoot: string, segments: readonly string[]): Promise<string> {
  let cur = realRoot;
  try {
    for (const seg of segments) {
      const p = join(cur, seg);
      const st = await lstat(p);
      if (!st.isSymbolicLink()) {
        cur = p;
        continue;
      }
      const lexical = resolve(cur, await readlink(p));
      if (!isInside(realRoot, lexical)) throw invalid('path leads outside the storage root (through a symlink)');
      const real = await realpath(p);
      if (!isInside(realRoot, real)) throw invalid('path leads outside the storage root (through a symlink)');
      cur = real;
    }
  } catch (err) {
    throw lookupError(err);
  }
  return cur;
}

export interface ReadOptions {
  /** Refuse files larger than this (bytes). */
  readonly maxBytes: number;
  /** Built when a file exceeds maxBytes (the caller picks the error). */
  readonly tooLarge: (sizeBytes: number) => SvcError;
  /**
   * A directory the root itself must resolve inside (the storage root for an agent's inbox), so
   * a per-agent root swapped for a symlink cannot widen what is readable.
   */
  readonly container?: string;
}

const OPEN_FLAGS = fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK;

/** A regular file opened by {@link openFileInRoot}; the caller closes `fh`. */
export interface OpenedFile {
  readonly fh: FileHandle;
  readonly sizeBytes: number;
  /** The last path segment (for Content-Type and Content-Disposition). */
  readonly name: string;
}

/** The walk: `relPath` (client text) checked and resolved under `rootDir`. */
async function targetInRoot(
  rootDir: string,
  relPath: string | undefined,
  opts: ReadOptions,
): Promise<{ segments: string[]; realRoot: string; target: string }> {
  const segments = parseRelativePath(relPath);
  let realRoot: string;
  try {
    realRoot = await realpath(rootDir);
    if (opts.container !== undefined && !isInside(await realpath(opts.container), realRoot)) {
      throw invalid('the storage area leads outside the storage root');
    }
  } catch (err) {
    throw lookupError(err);
  }
  const target = await resolveInRoot(realRoot, segments);
  return { segments, realRoot, target };
}

/**
 * Open the regular file at `relPath` (client text) under `rootDir` for streaming. Rejects with 400
 * `storage.invalid_path`, 404 `storage.not_found`, or `opts.tooLarge(size)`.
 */
export async function openFileInRoot(rootDir: string, relPath: string | undefined, opts: ReadOptions): Promise<OpenedFile> {
  const { segments, realRoot, target } = await targetInRoot(rootDir, relPath, opts);
  let fh: FileHandle;
  try {
    fh = await open(target, OPEN_FLAGS);
  } catch (err) {
    throw lookupError(err);
  }
  try {
    await checkOpenedInside(fh.fd, realRoot);
    const st = await fh.stat();
    if (st.isDirectory()) throw invalid('path names a directory, not a file');
    if (!st.isFile()) throw invalid('path names something that is not a regular file');
    if (st.size > opts.maxBytes) throw opts.tooLarge(st.size);
    return { fh, sizeBytes: st.size, name: segments[segments.length - 1] ?? 'download' };
  } catch (err) {
    await fh.close();
    throw err;
  }
}

/** Where /proc is mounted (Linux), the descriptor's real path must still be inside the root. */
async function checkOpenedInside(fd: number, realRoot: string): Promise<void> {
  let actual: string;
  try {
    actual = await readlink(`/proc/self/fd/${fd}`);
  } catch {
    return; // no /proc: the O_NOFOLLOW open after the walk is the last line
  }
  const clean = actual.endsWith(' (deleted)') ? actual.slice(0, -' (deleted)'.length) : actual;
  if (!isInside(realRoot, clean)) throw invalid('path leads outside the storage root');
}
