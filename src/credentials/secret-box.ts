/**
 * Encryption of credential values at rest: AES-256-GCM with a random 96-bit nonce per value and
 * the credential's name as associated data (a ciphertext copied to another name's row does not
 * decrypt). The 32-byte key lives in `<SECRETS_DIR>/credentials.key` (base64, mode 0600, written
 * atomically; created on first start), never in the SQLite file.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SvcError } from '../core/errors.js';
import { assertPrivateFile, ensurePrivateDir, exists, PRIVATE_FILE_MODE, withLockFile, writeFileAtomic } from '../identity/secure-files.js';

export const CREDENTIALS_KEY_FILE = 'credentials.key';
const kKeyBytes = 32;
const kNonceBytes = 12;
const kTagBytes = 16;

/** A sealed value: nonce and ciphertext with the GCM tag appended. */
export interface Sealed {
  readonly nonce: Buffer;
  readonly box: Buffer;
}

export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== kKeyBytes) throw new Error(`a credentials key has ${kKeyBytes} bytes`);
    this.#key = key;
  }

  /** Loads `<dir>/credentials.key`, creating it (0600, directory 0700) when missing. */
  static async open(secretsDir: string): Promise<SecretBox> {
    await ensurePrivateDir(secretsDir);
    const path = join(secretsDir, CREDENTIALS_KEY_FILE);
    await withLockFile(`${path}.lock`, async () => {
      if (!(await exists(path))) await writeFileAtomic(path, `${randomBytes(kKeyBytes).toString('base64')}\n`, PRIVATE_FILE_MODE);
    });
    await assertPrivateFile(path);
    const key = Buffer.from((await readFile(path, 'utf8')).trim(), 'base64');
    if (key.length !== kKeyBytes) throw new SvcError('server.internal', `${path} does not hold a ${kKeyBytes}-byte base64 key`, { path });
    return new SecretBox(key);
  }

  seal(name: string, value: string): Sealed {
    const nonce = randomBytes(kNonceBytes);
    const c = createCipheriv('aes-256-gcm', this.#key, nonce);
    c.setAAD(Buffer.from(name, 'utf8'));
    const box = Buffer.concat([c.update(value, 'utf8'), c.final(), c.getAuthTag()]);
    return { nonce, box };
  }

  /** The value; throws server.internal when the box was tampered with or sealed for another name. */
  open(name: string, sealed: Sealed): string {
    try {
      const d = createDecipheriv('aes-256-gcm', this.#key, sealed.nonce);
      d.setAAD(Buffer.from(name, 'utf8'));
      d.setAuthTag(sealed.box.subarray(sealed.box.length - kTagBytes));
      return Buffer.concat([d.update(sealed.box.subarray(0, sealed.box.length - kTagBytes)), d.final()]).toString('utf8');
    } catch {
      throw new SvcError('server.internal', `credential ${name} cannot be decrypted with the current key`);
    }
  }
}
