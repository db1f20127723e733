/**
 * Task artifacts (spec 2 "Task artifact entry", 4.6): the files a task leaves in its outbox,
 * `<storage root>/outbox/<task_id>/`, that match the manifest's `artifacts.patterns`.
 *
 * Convention: the coding agent runs with the outbox available (the agent share) and writes what
 * it wants kept there; the server lists it during `completing`. Each entry has
 *   name          path relative to the outbox, `/`-separated (`reports/summary.md`), unique;
 *                 the key of GET /api/v1/tasks/{id}/artifacts/{name} (percent-encode the slashes)
 *   path          the same file relative to the storage root (`outbox/<task_id>/reports/summary.md`)
 *   size_bytes, content_type (from the extension), checksum (sha256, lower-case hex)
 * Only regular files count: symlinks are skipped (never followed, never hashed), so a task
 * cannot make the server read outside its outbox. Dotfiles match like any other name. At most
 * `maxFiles` entries (default 1000), in name order.
 */
import { createHash } from 'node:crypto';
import { constants as fsc, type Dirent } from 'node:fs';
import { open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { contentTypeFor } from '../storage/content-type.js';

export interface ArtifactEntry {
  name: string;
  path: string;
  size_bytes: number;
  content_type: string;
  checksum: string;
}

/** Default cap on listed artifacts. */
export const DEFAULT_MAX_ARTIFACTS = 1000;
const HASH_CHUNK_BYTES = 64 * 1024;

/**
 * A glob as a RegExp over `/`-separated relative paths: `**` any number of whole segments
 * (including none), `*` any run of characters within a segment, `?` one character within a
 * segment; everything else literal.
 */
export function globToRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === '*' && pattern[i + 1] === '*') {
      const atStart = i === 0 || pattern[i - 1] === '/';
      const atEnd = i + 2 === pattern.length || pattern[i + 2] === '/';
      i++;
      if (atStart && atEnd) {
        // `**/` matches zero or more leading segments; a final `**` matches the rest.
        if (pattern[i + 1] === '/') {
          re += '(?:[^/]+/)*';
          i++;
        } else re += '.*';
      } else re += '[^/]*';
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[\\^$.|+()[\]{}]/gu, '\\$&');
  }
  return new RegExp(`^${re}$`, 'u');
}

export interface CollectOptions {
  readonly patterns: readonly string[];
  /** Prefix of `path` (default `outbox/<basename of outboxDir>`). */
  readonly pathPrefix?: string;
  readonly maxFiles?: number;
  readonly signal?: AbortSignal;
}

/** List and hash the outbox's artifacts. Resolves [] when the outbox does not exist. */
export async function collectArtifacts(outboxDir: string, opts: CollectOptions): Promise<ArtifactEntry[]> {
  const matchers = opts.patterns.map(globToRegExp);
  const max = opts.maxFiles ?? DEFAULT_MAX_ARTIFACTS;
  const prefix = opts.pathPrefix ?? `outbox/${outboxDir.split('/').filter(Boolean).at(-1) ?? ''}`;
  const names: string[] = [];
  const stack: string[] = [''];
  while (stack.length > 0) {
    opts.signal?.throwIfAborted();
    const rel = stack.pop() as string;
    let entries: Dirent[];
    try {
      entries = await readdir(join(outboxDir, rel), { withFileTypes: true });
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      throw err;
    }
    for (const ent of entries) {
      const name = rel === '' ? ent.name : `${rel}/${ent.name}`;
      if (ent.isDirectory()) stack.push(name);
      else if (ent.isFile() && matchers.some((m) => m.test(name))) names.push(name);
    }
  }
  names.sort();
  const out: ArtifactEntry[] = [];
  for (const name of names.slice(0, max)) {
    opts.signal?.throwIfAborted();
    const hashed = await hashFile(join(outboxDir, name));
    if (hashed === null) continue; // replaced or removed while listing
    out.push({ name, path: `${prefix}/${name}`, size_bytes: hashed.sizeBytes, content_type: contentTypeFor(name), checksum: hashed.sha256 });
  }
  return out;
}

/** sha256 and size of a regular file, opened without following a symlink; null if it is gone or not a file. */
async function hashFile(path: string): Promise<{ sha256: string; sizeBytes: number } | null> {
  let fh;
  try {
    fh = await open(path, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    if (!(await fh.stat()).isFile()) return null;
    const hash = createHash('sha256');
    const buf = Buffer.allocUnsafe(HASH_CHUNK_BYTES);
    let size = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      hash.update(buf.subarray(0, bytesRead));
      size += bytesRead;
    }
    return { sha256: hash.digest('hex'), sizeBytes: size };
  } finally {
    await fh.close();
  }
}
