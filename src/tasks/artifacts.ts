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
import type { Dirent } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { JobRunner } from '../util/job-runner.js';
import { contentTypeFor } from '../storage/content-type.js';
import type { TaskArtifact as ArtifactEntry } from '../wire/tasks.js';
import { hashFileJob } from './task-jobs.js';

/** One listed artifact: the API's TaskArtifact (src/wire/tasks.ts). */
export type { ArtifactEntry };

/** Default cap on listed artifacts. */
export const DEFAULT_MAX_ARTIFACTS = 1000;

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
  /** Hash the files on the job pool; without it they are hashed here. */
  readonly jobs?: JobRunner;
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
    const hashed = await hashFileJob(opts.jobs, join(outboxDir, name), opts.signal);
    if (hashed === null) continue; // replaced or removed while listing
    out.push({
      name,
      path: `${prefix}/${name}`,
      size_bytes: hashed.sizeBytes,
      content_type: contentTypeFor(name),
      checksum: hashed.sha256,
    });
  }
  return out;
}
