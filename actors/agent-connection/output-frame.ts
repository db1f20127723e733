/**
 * The thread's scratch buffer kFrameCommandOutput payloads are assembled in (the Outbox copies a
 * frame out before the next one is built, or queues a copy), so sending a chunk allocates nothing.
 */
import { kOutputHeaderBytes, outputFrameBytes, writeOutputFrame, type OutputHeader } from '../protocol/agent-frames.js';

let scratch = new Uint8Array(64 * 1024 + kOutputHeaderBytes + 8);

/**
 * A kFrameCommandOutput payload (layout in agent-frames.ts) in the scratch buffer; valid until the
 * next call. The data is padded to its source's address modulo 8 (the scratch and every ring
 * payload start 8-aligned), so both copies of a chunk that sits anywhere in a shard ring, into
 * the scratch and from it into the outbound ring, go word by word.
 */
export function outputFrameInScratch(o: OutputHeader, data: Uint8Array): Uint8Array {
  const pad = (data.byteOffset - kOutputHeaderBytes) & 7;
  const bytes = outputFrameBytes(data.byteLength, pad);
  if (scratch.byteLength < bytes) scratch = new Uint8Array(bytes * 2);
  return writeOutputFrame(scratch.subarray(0, bytes), o, data, pad);
}
