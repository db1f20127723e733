/**
 * Signs lease public keys into OpenSSH user certificates with the CA private key at
 * SVC_GATEWAY_SSH_CA_KEY, by running `ssh-keygen -s` (openssh-client; set-up installs it, step
 * `start`). The CA key is only ever read by ssh-keygen from its own path: it is never copied.
 *
 * Where the certificate exists: ssh-keygen writes it next to the public key it signs, so each
 * signing gets a private temporary directory (mkdtemp: 0700, files 0600) holding only the public
 * key and, for the few milliseconds until it is read back, the certificate; the directory is
 * removed in `finally`, whether signing worked or not. Beyond that the certificate exists only in
 * the 201 response: never in the lease store, the audit log or a log line.
 *
 * What a certificate says (ssh-keygen -L shows it): key id = the lease id, the one principal,
 * valid-after/valid-before = issued_at/expires_at (UTC seconds), no critical options, and the
 * extensions of the access mode: `ssh` → permit-pty and permit-port-forwarding (editors, scp/sftp,
 * port forwards); no agent or X11 forwarding, no ~/.ssh/rc.
 */
import { constants } from 'node:fs';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SvcError } from '../../core/errors.js';
import { run } from '../../image/run.js';
import { errorMessage } from '../../util/error-message.js';
import type { SshAccessMode } from './lease-types.js';
import { parsePublicKey, sshSha256 } from './public-key.js';

/** `-O` options of each access mode (`clear` first: ssh-keygen's defaults grant every extension). */
export const ACCESS_MODE_CERT_OPTIONS: Readonly<Record<SshAccessMode, readonly string[]>> = {
  ssh: ['clear', 'permit-pty', 'permit-port-forwarding'],
};

/** Bound of one ssh-keygen run, ms. */
const kSignTimeoutMs = 10_000;

export interface SignRequest {
  /** `type base64` (ParsedPublicKey.line). */
  readonly publicKeyLine: string;
  /** The certificate's key id: the lease id. */
  readonly keyId: string;
  readonly principal: string;
  readonly accessMode: SshAccessMode;
  /** Unix seconds, inclusive start and exclusive end of validity. */
  readonly validAfterSec: number;
  readonly validBeforeSec: number;
}

export interface SignedCertificate {
  /** One line, `<type>-cert-v01@openssh.com <base64>`. */
  readonly certificate: string;
  /** `sha256:<hex>` of the certificate blob. */
  readonly sha256: string;
}

export class SshCertificateSigner {
  readonly caKeyPath: string;
  /** The CA public key's fingerprint (logged at start; no secret). */
  readonly caSha256: string;

  private constructor(caKeyPath: string, caSha256: string) {
    this.caKeyPath = caKeyPath;
    this.caSha256 = caSha256;
  }

  /**
   * Checks that `caKeyPath` is a readable, unencrypted OpenSSH private key (ssh-keygen -y derives
   * its public key) and returns a signer; rejects with an error naming the path otherwise.
   */
  static async open(caKeyPath: string): Promise<SshCertificateSigner> {
    try {
      await access(caKeyPath, constants.R_OK);
    } catch (err) {
      throw new Error(`SVC_GATEWAY_SSH_CA_KEY=${caKeyPath}: the CA private key cannot be read (${errorMessage(err)})`, { cause: err });
    }
    try {
      // -P '': an encrypted key fails here instead of prompting for a passphrase.
      const pub = (await run('ssh-keygen', ['-y', '-P', '', '-f', caKeyPath], { timeoutMs: kSignTimeoutMs })).toString('utf8');
      return new SshCertificateSigner(caKeyPath, parsePublicKey(pub.trim()).sha256);
    } catch (err) {
      throw new Error(
        `SVC_GATEWAY_SSH_CA_KEY=${caKeyPath}: not a usable SSH CA private key (an unencrypted OpenSSH private key, mode 0600): ${errorMessage(err)}`,
        { cause: err },
      );
    }
  }

  /** Signs one key; rejects with 500 ssh_lease.signing_failed (no key material in the message). */
  async sign(r: SignRequest): Promise<SignedCertificate> {
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-ssh-sign-'));
    try {
      const keyPath = join(dir, 'lease.pub');
      await writeFile(keyPath, `${r.publicKeyLine}\n`, { mode: 0o600, flag: 'wx' });
      const args = ['-s', this.caKeyPath, '-q', '-I', r.keyId, '-n', r.principal];
      args.push('-V', `0x${r.validAfterSec.toString(16)}:0x${r.validBeforeSec.toString(16)}`);
      for (const o of ACCESS_MODE_CERT_OPTIONS[r.accessMode]) args.push('-O', o);
      try {
        await run('ssh-keygen', [...args, keyPath], { timeoutMs: kSignTimeoutMs, cwd: dir });
      } catch (err) {
        throw new SvcError('ssh_lease.signing_failed', `ssh-keygen could not sign the lease's key: ${errorMessage(err)}`);
      }
      // ssh-keygen appends the file name as a comment when the key has none: only type and body are kept.
      const written = await readFile(join(dir, 'lease-cert.pub'), 'utf8');
      const m = /^(\S+-cert-v01@openssh\.com) ([A-Za-z0-9+/]+={0,2})(?: |\n|$)/.exec(written);
      if (m === null) throw new SvcError('ssh_lease.signing_failed', 'ssh-keygen wrote something that is not a certificate');
      return { certificate: `${m[1] as string} ${m[2] as string}`, sha256: sshSha256(Buffer.from(m[2] as string, 'base64')) };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}
