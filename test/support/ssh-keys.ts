/**
 * A fresh unencrypted key pair made by the real ssh-keygen at `path` (and `path`.pub): the .pub
 * line, the private key text and the path.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export interface TestSshKey {
  pub: string;
  priv: string;
  path: string;
}

export function sshKeygen(path: string, opts: { type?: string; bits?: number; comment?: string } = {}): TestSshKey {
  execFileSync('ssh-keygen', [
    '-q',
    '-t',
    opts.type ?? 'ed25519',
    ...(opts.bits === undefined ? [] : ['-b', String(opts.bits)]),
    '-N',
    '',
    '-C',
    opts.comment ?? 'test@sandboxd',
    '-f',
    path,
  ]);
  return { pub: readFileSync(`${path}.pub`, 'utf8'), priv: readFileSync(path, 'utf8'), path };
}
