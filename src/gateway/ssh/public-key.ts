/**
 * The public key of an SSH lease request: one OpenSSH public key line, parsed here in Node (no
 * program runs for it) down to the key's wire blob, so that its fingerprint is the spec's
 * `sha256:<hex>` of exactly the digest `ssh-keygen -lf` prints as `SHA256:<base64>` (the SHA-256
 * of the blob), and nothing of the key but that fingerprint is ever kept.
 *
 * Accepted: ssh-ed25519, ecdsa-sha2-nistp256/384/521 (a point on the curve) and ssh-rsa of at
 * least 2048 bits. Refused with their own codes: a private key (never echoed, never logged: the
 * error message does not quote the input), a certificate or a malformed line
 * (`ssh_lease.public_key_invalid`), other key types such as ssh-dss or security-key types
 * (`ssh_lease.public_key_unsupported`).
 */
import { createHash, ECDH } from 'node:crypto';
import { SvcError } from '../../core/errors.js';

/** Longest public_key accepted (a 16384-bit RSA key line is ~2.8 KiB). */
export const kMaxPublicKeyChars = 16 * 1024;
export const kMinRsaBits = 2048;
const kMaxRsaBits = 16384;

export type SshKeyAlgorithm = 'ed25519' | 'ecdsa' | 'rsa';

export interface ParsedPublicKey {
  /** The key type of the line and the blob (`ssh-ed25519`, …). */
  readonly type: string;
  readonly algorithm: SshKeyAlgorithm;
  readonly bits: number;
  /** `sha256:<hex>` (spec part 2) of the key blob: the digest `ssh-keygen -lf` prints in base64. */
  readonly sha256: string;
  /** `type base64`, without the comment: what the signer hands ssh-keygen. */
  readonly line: string;
}

const ECDSA_CURVES: Readonly<Record<string, { curve: string; openssl: string; pointBytes: number; bits: number }>> = {
  'ecdsa-sha2-nistp256': { curve: 'nistp256', openssl: 'prime256v1', pointBytes: 65, bits: 256 },
  'ecdsa-sha2-nistp384': { curve: 'nistp384', openssl: 'secp384r1', pointBytes: 97, bits: 384 },
  'ecdsa-sha2-nistp521': { curve: 'nistp521', openssl: 'secp521r1', pointBytes: 133, bits: 521 },
};

const invalid = (why: string): SvcError => new SvcError('ssh_lease.public_key_invalid', `public_key ${why}`);

/** `sha256:<hex>` of an SSH wire blob (a key's or a certificate's), the spec's fingerprint form. */
export function sshSha256(blob: Uint8Array): string {
  return `sha256:${createHash('sha256').update(blob).digest('hex')}`;
}

/** Parses and checks `value` (the request's public_key); throws the SvcError to answer otherwise. */
export function parsePublicKey(value: unknown): ParsedPublicKey {
  if (typeof value !== 'string') throw invalid('must be a string: one OpenSSH public key line');
  // Checked before anything else, and the message never quotes the input.
  if (/PRIVATE KEY-----|PuTTY-User-Key-File/.test(value)) {
    throw new SvcError(
      'ssh_lease.private_key_refused',
      'public_key holds a private key: send the public key only (the .pub file); the private key was not stored or logged',
    );
  }
  if (value.length > kMaxPublicKeyChars) throw invalid(`is longer than ${kMaxPublicKeyChars} characters`);
  const text = value.replace(/\r?\n$/, '');
  if (/[\r\n\0]/.test(text)) throw invalid('must be a single line');
  const m = /^([A-Za-z0-9@._-]{1,64}) ([A-Za-z0-9+/]+={0,2})(?: [^\r\n]*)?$/.exec(text);
  if (m === null) throw invalid('must be an OpenSSH public key line: "<type> <base64> [comment]"');
  const type = m[1] as string;
  const b64 = m[2] as string;
  if (type.includes('-cert-v01@openssh.com')) throw invalid('is a certificate, not a public key');
  const ecdsa = ECDSA_CURVES[type];
  if (type !== 'ssh-ed25519' && type !== 'ssh-rsa' && ecdsa === undefined) {
    throw new SvcError(
      'ssh_lease.public_key_unsupported',
      `public_key type ${type} is not accepted: use ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa of at least ${kMinRsaBits} bits`,
      { type },
    );
  }
  const blob = Buffer.from(b64, 'base64');
  const r = new BlobReader(blob);
  if (r.string().toString('latin1') !== type) throw invalid(`is not a ${type} key: its body names another type`);
  let bits: number;
  let algorithm: SshKeyAlgorithm;
  if (type === 'ssh-ed25519') {
    if (r.string().length !== 32) throw invalid('is not an ed25519 key: the key is not 32 bytes');
    algorithm = 'ed25519';
    bits = 256;
  } else if (ecdsa !== undefined) {
    if (r.string().toString('latin1') !== ecdsa.curve) throw invalid(`is not a ${type} key: its body names another curve`);
    const point = r.string();
    if (point.length !== ecdsa.pointBytes || point[0] !== 0x04 || !onCurve(point, ecdsa.openssl))
      throw invalid(`is not a ${type} key: the point is not on the curve`);
    algorithm = 'ecdsa';
    bits = ecdsa.bits;
  } else {
    const e = unsigned(r.string());
    const n = unsigned(r.string());
    bits = n.length === 0 ? 0 : (n.length - 1) * 8 + (32 - Math.clz32(n[0] as number));
    if (e.length === 0 || ((e.at(-1) as number) & 1) === 0 || bits > kMaxRsaBits) throw invalid('is not a usable RSA key');
    if (bits < kMinRsaBits) {
      throw new SvcError(
        'ssh_lease.public_key_unsupported',
        `public_key is an RSA key of ${bits} bits: at least ${kMinRsaBits} are needed`,
        {
          type,
          bits,
        },
      );
    }
    algorithm = 'rsa';
  }
  if (!r.done()) throw invalid(`is not a ${type} key: its body has bytes after the key`);
  return { type, algorithm, bits, sha256: sshSha256(blob), line: `${type} ${blob.toString('base64')}` };
}

function onCurve(point: Buffer, curve: string): boolean {
  try {
    ECDH.convertKey(point, curve, undefined, undefined, 'uncompressed');
    return true;
  } catch {
    return false;
  }
}

/** An mpint's magnitude without its leading zero bytes (negative numbers are refused by the caller's checks). */
function unsigned(mpint: Buffer): Buffer {
  let i = 0;
  while (i < mpint.length && mpint[i] === 0) i++;
  if (i === 0 && mpint.length > 0 && ((mpint[0] as number) & 0x80) !== 0) throw invalid('is not a usable RSA key: negative number');
  return mpint.subarray(i);
}

/** Reads the SSH wire format's length-prefixed strings (RFC 4251 §5). */
class BlobReader {
  readonly #b: Buffer;
  #at = 0;
  constructor(b: Buffer) {
    this.#b = b;
  }
  string(): Buffer {
    if (this.#at + 4 > this.#b.length) throw invalid('is truncated');
    const len = this.#b.readUInt32BE(this.#at);
    const start = this.#at + 4;
    if (len > this.#b.length - start) throw invalid('is truncated');
    this.#at = start + len;
    return this.#b.subarray(start, this.#at);
  }
  done(): boolean {
    return this.#at === this.#b.length;
  }
}
