/**
 * sha256 and size of one file, read in chunks without following a symlink (artifact checksums,
 * spec 4.6). Runs wherever it is called: on the job pool through task-jobs.ts, or on the main
 * thread when the server runs inline.
 */
import { createHash } from 'node:crypto';
import { constants as fsc } from 'node:fs';
import { open } from 'node:fs/promises';
import { isMainThread } from 'node:worker_threads';

/**
 * On the main thread 64 KiB (one update holds the loop ≈ 0.05 ms); on a pool thread nothing else
 * waits for the loop, so 1 MiB reads cut the read round trips sixteenfold (the jobs bench: pool
 * hashing ran at half the inline rate with 64 KiB).
 */
const HASH_CHUNK_BYTES = isMainThread ? 64 * 1024 : 1024 * 1024;

/** What hashFile finds. */
export interface HashedFile {
  /** lower-case hex */
  readonly sha256: string;
  readonly sizeBytes: number;
}

/** sha256 and size of a regular file, opened without following a symlink; null if it is gone or not a file. */
export async function hashFile(path: string): Promise<HashedFile | null> {
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
