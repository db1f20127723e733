/**
 * sha256 and size of one file, read in 64 KiB chunks without following a symlink (artifact
 * checksums, spec 4.6). Runs wherever it is called: on the job pool through task-jobs.ts.
 */
import { createHash } from 'node:crypto';
import { constants as fsc } from 'node:fs';
import { open } from 'node:fs/promises';

const HASH_CHUNK_BYTES = 64 * 1024;

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
