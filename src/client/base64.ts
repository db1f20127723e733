/**
 * Base64 of raw bytes without Buffer (browser and Node): pty-ws.v1 and agent-output frames
 * carry terminal bytes as base64.
 */

const kChunk = 0x8000;

export function bytesToBase64(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += kChunk) {
    bin += String.fromCharCode(...bytes.subarray(i, Math.min(bytes.length, i + kChunk)));
  }
  return btoa(bin);
}

/** Throws on text that is not base64 (the caller treats that as a protocol error). */
export function base64ToBytes(text: string): Uint8Array {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
