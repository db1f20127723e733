/**
 * The thread's scratch buffer kFrameCommandOutput payloads are assembled in (the Outbox copies a
 * frame out before the next one is built, or queues a copy), so sending a chunk allocates nothing.
 */
import { kOutputHeaderBytes, writeOutputFrame, type OutputHeader } from '../protocol/agent-frames.js';

let scratch = new Uint8Array(64 * 1024 + kOutputHeaderBytes);

/** A kFrameCommandOutput payload (layout in agent-frames.ts) in the scratch buffer; valid until the next call. */
export function outputFrameInScratch(o: OutputHeader, data: Uint8Array): Uint8Array {
  const bytes = kOutputHeaderBytes + data.byteLength;
  if (scratch.byteLength < bytes) scratch = new Uint8Array(bytes * 2);
  return writeOutputFrame(scratch.subarray(0, bytes), o, data);
}
