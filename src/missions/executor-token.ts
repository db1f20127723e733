/**
 * Dispatch bearer tokens (spec part 5): issued at executor registration, stored as SHA-256,
 * compared in constant time.
 *
 * The comparison never looks at the presented token's length or content before hashing: the
 * presented value (empty when the header is missing) is hashed to 32 bytes and compared with
 * crypto.timingSafeEqual against every registered executor's hash, without stopping at a match.
 * A wrong token of the right length, of another length, or none takes the same path; the time
 * depends only on the number of executors.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Token prefix: recognisable in a leaked-secret scan, never a secret by itself. */
export const TOKEN_PREFIX = 'sbxe_';
/** Random bytes in a token (256 bits). */
export const kTokenBytes = 32;

/** A new token: `sbxe_` and 43 base64url characters. */
export function newExecutorToken(): string {
  return `${TOKEN_PREFIX}${randomBytes(kTokenBytes).toString('base64url')}`;
}

export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/**
 * The token of an `Authorization` header value: what follows `Bearer ` (scheme case-insensitive,
 * RFC 7235), or '' when the header is missing or of another scheme. Never throws.
 */
export function bearerOf(header: string | undefined): string {
  if (header === undefined) return '';
  const m = /^bearer[ ]+(\S+)[ ]*$/i.exec(header);
  return m === null ? '' : (m[1] as string);
}

/**
 * The id of the executor whose hash `presented` hashes to, or undefined. Constant time in the
 * presented token (see the file comment); an empty token never matches.
 */
export function matchToken(
  presented: string,
  executors: Iterable<{ readonly id: string; readonly tokenHash: Buffer }>,
): string | undefined {
  const h = hashToken(presented);
  let found: string | undefined;
  for (const e of executors) {
    // No early exit: every hash is compared whatever matched before.
    if (timingSafeEqual(h, e.tokenHash) && found === undefined) found = e.id;
  }
  return presented === '' ? undefined : found;
}
