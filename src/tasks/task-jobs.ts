/**
 * The tasks feature's CPU-bound work, as jobs for the job pool (actors/jobs; this file is the job
 * module it loads by URL) and as the typed calls the feature makes: each call runs the job
 * through a JobRunner when it has one, and the same function inline when it has none (unit tests,
 * tools). What moved here is what measured as worth it (native-bench `jobs`): hashing artifacts
 * (sha256 of whole files), checking a guest outbox's tar archive, and parsing task manifests.
 */
import { joinOwned, type ByteSlabs } from '../util/byte-slabs.js';
import { transferring, type JobRunner } from '../util/job-runner.js';
import { hashFile, type HashedFile } from './file-hash.js';
import { parseTaskSubmission, type ManifestDefaults, type TaskManifest } from './manifest.js';
import { scanTar, type TarContents, type TarIndex } from './tar-reader.js';

/** This module, for JobPool.start({ jobModules }). */
export const TASK_JOBS_MODULE = new URL(import.meta.url);

interface ScanArgs {
  /** The archive in order, each part over an ArrayBuffer of its own (moved here, not copied). */
  readonly parts: Uint8Array[];
  readonly maxFiles?: number;
}

/** Joins the parts and checks the archive: what the job runs, and what runs inline without a pool. */
function scanParts({ parts, maxFiles }: ScanArgs): { archive: Buffer; index: TarIndex } {
  const archive = joinOwned(parts);
  return { archive, index: scanTar(archive, maxFiles === undefined ? {} : { maxFiles }) };
}

/** The jobs, by name (loaded by the pool). */
export const jobs = {
  'tasks.hashFile': (args: unknown): Promise<HashedFile | null> => hashFile((args as { path: string }).path),
  'tasks.scanTar': (args: unknown): unknown => {
    const { archive, index } = scanParts(args as ScanArgs);
    // the joined archive goes back to the caller with the ranges, moved, not copied
    return transferring({ archive, index }, [archive.buffer as ArrayBuffer]);
  },
  'tasks.parseSubmission': (args: unknown): TaskManifest => {
    const { body, defaults } = args as { body: unknown; defaults: ManifestDefaults };
    return parseTaskSubmission(body, defaults);
  },
};

/** sha256 (hex) and size of a regular file, not following a symlink; null when it is gone or not a file. */
export function hashFileJob(runner: JobRunner | undefined, path: string, signal?: AbortSignal): Promise<HashedFile | null> {
  if (runner === undefined) return hashFile(path);
  return runner.run('tasks.hashFile', { path }, signal === undefined ? {} : { signal }) as Promise<HashedFile | null>;
}

/**
 * Reads the tar archive collected in `bytes` (see tar-reader.ts for what is refused; `bytes` is
 * emptied). With a runner, the slabs move to the job, which joins and checks them and moves the
 * archive back: the main thread never copies it whole. The files' data are views of that one
 * buffer. Rejects with TarError's message for a bad archive.
 */
export async function readTarJob(runner: JobRunner | undefined, bytes: ByteSlabs, opts: { maxFiles?: number } = {}): Promise<TarContents> {
  const parts = bytes.take();
  const args: ScanArgs = opts.maxFiles === undefined ? { parts } : { parts, maxFiles: opts.maxFiles };
  const { archive, index } =
    runner === undefined
      ? scanParts(args)
      : ((await runner.run('tasks.scanTar', args, { transfer: parts.map((p) => p.buffer as ArrayBuffer) })) as {
          archive: Uint8Array;
          index: TarIndex;
        });
  const whole = Buffer.from(archive.buffer, archive.byteOffset, archive.byteLength);
  return { files: index.entries.map((e) => ({ name: e.name, data: whole.subarray(e.start, e.end) })), skipped: index.skipped };
}

/** parseTaskSubmission off the main thread: the manifest, or SvcError task.invalid_manifest. */
export async function parseSubmissionJob(runner: JobRunner | undefined, body: unknown, defaults: ManifestDefaults): Promise<TaskManifest> {
  if (runner === undefined) return parseTaskSubmission(body, defaults);
  return (await runner.run('tasks.parseSubmission', { body, defaults })) as TaskManifest;
}
