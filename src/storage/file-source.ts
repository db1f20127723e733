/**
 * A ByteSource (src/http streamed responses) over an open file: reads `lengthBytes` from offset 0
 * in chunks of `chunkBytes`, each into a fresh buffer (the server may still hold the previous one
 * while the kernel takes it), and closes the file when the response ends.
 */
import type { FileHandle } from 'node:fs/promises';
import type { ByteSource } from '../http/types.js';

/** Default chunk of a streamed download: 256 KiB. */
export const DEFAULT_CHUNK_BYTES = 256 * 1024;

export function fileSource(fh: FileHandle, lengthBytes: number, chunkBytes = DEFAULT_CHUNK_BYTES): ByteSource {
  let offset = 0;
  let closed = false;
  return {
    async next() {
      if (offset >= lengthBytes) return null;
      const want = Math.min(chunkBytes, lengthBytes - offset);
      const buf = Buffer.allocUnsafe(want);
      const { bytesRead } = await fh.read(buf, 0, want, offset);
      if (bytesRead === 0) return null; // the file shrank: the server cuts the response
      offset += bytesRead;
      return buf.subarray(0, bytesRead);
    },
    async close() {
      if (closed) return;
      closed = true;
      await fh.close();
    },
  };
}
