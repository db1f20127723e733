/**
 * A local VM's sshd (test driver; README "SSH connector"): with SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH
 * set, each local VM gets a real OpenSSH sshd on 127.0.0.1:<free port>, standing in for the
 * guest's own, configured as a guest is provisioned (spec 4.14 "Guest provisioning"):
 *
 *   <vm>/sshd/ssh_host_ed25519_key   its own host key (ssh-keygen, kept across restarts)
 *   <vm>/sshd/ca.pub                 a copy of the CA public key: the only key it trusts
 *   <vm>/sshd/principals/<user>      SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS (default: the user)
 *   <vm>/sshd/sshd_config            TrustedUserCAKeys, AuthorizedPrincipalsFile, AuthorizedKeysFile
 *                                    none (a plain key is refused), no passwords, AllowUsers <user>
 *   <vm>/sshd.log                    its log (-e)
 *
 * `sshd -D -e -f <config>` runs in the foreground as sandboxd's child, marked as the VM's process
 * (local-vm-processes.ts), so a VM that powers off, or a sandboxd that died, leaves none behind.
 * Its address is the VM's known SSH address for the connector. The user must exist on this host,
 * and unless sandboxd runs as root it can only be sandboxd's own user.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { copyFile, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import type { ListenAddress } from '../config/parsers.js';
import { sshPublicKeyLine } from './fw-cfg.js';
import { localVmEnv } from './local-vm-processes.js';

const execFileAsync = promisify(execFile);

/** sshd refuses to re-exec itself unless started by an absolute path. */
export const SSHD_PATH = '/usr/sbin/sshd';
/** sshd's privilege-separation directory, required when it runs as root. */
const kPrivsepDir = '/run/sshd';
const kReadyTimeoutMs = 5000;
const kStopGraceMs = 2000;

export interface LocalSshdOptions {
  /** SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH. */
  readonly caPublicKeyPath: string;
  /** SVC_GATEWAY_SSH_AUTHORIZED_USER. */
  readonly user: string;
  /** SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS; empty: the user. */
  readonly principals: readonly string[];
  readonly sshdPath?: string;
  readonly logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
}

interface Running {
  readonly vm: string;
  readonly instanceId: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  readonly address: ListenAddress;
  gone: boolean;
}

export class LocalSshdSupervisor {
  readonly #o: LocalSshdOptions;
  readonly #running = new Map<string, Running>();

  constructor(o: LocalSshdOptions) {
    this.#o = o;
  }

  /**
   * Checks the configuration before any VM needs it: the CA public key must be one public key
   * line (never a private key: it is copied into every VM) that `ssh-keygen -l` reads, and the
   * user a name sshd takes. Rejects with a message naming the variable.
   */
  static async check(o: Pick<LocalSshdOptions, 'caPublicKeyPath' | 'user' | 'principals'>): Promise<void> {
    await execFileAsync('ssh-keygen', ['-l', '-f', o.caPublicKeyPath]).catch((err: { stderr?: string; message: string }) => {
      throw new Error(
        `SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH=${o.caPublicKeyPath}: not an SSH public key (${(err.stderr ?? err.message).trim()})`,
      );
    });
    try {
      sshPublicKeyLine(await readFile(o.caPublicKeyPath, 'utf8'));
    } catch (err) {
      throw new Error(`SVC_GATEWAY_SSH_CA_PUBLIC_KEY_HOST_PATH=${o.caPublicKeyPath}: ${(err as Error).message}`, { cause: err });
    }
    if (!/^[a-z_][a-z0-9_.-]{0,31}$/i.test(o.user)) throw new Error(`SVC_GATEWAY_SSH_AUTHORIZED_USER=${o.user}: not a user name`);
    const bad = o.principals.find((p) => !/^[A-Za-z0-9_.@+-]{1,128}$/.test(p));
    if (bad !== undefined) throw new Error(`SVC_GATEWAY_SSH_AUTHORIZED_PRINCIPALS: "${bad}" is not a principal name`);
  }

  /** Starts the VM's sshd unless it runs; resolves with its address once it accepts connections. */
  async start(spec: { vm: string; vmDir: string; instanceId: string }): Promise<ListenAddress> {
    const cur = this.#running.get(spec.vm);
    if (cur !== undefined && !cur.gone) return cur.address;
    const dir = join(spec.vmDir, 'sshd');
    await this.#files(dir, spec.vm);
    if (process.getuid?.() === 0) await mkdir(kPrivsepDir, { recursive: true, mode: 0o755 });
    const port = await freePort();
    const config = join(dir, 'sshd_config');
    await writeFile(config, sshdConfig(dir, port, this.#o.user), { mode: 0o600 });
    const fd = openSync(join(spec.vmDir, 'sshd.log'), 'a', 0o600);
    let child: ChildProcess;
    try {
      child = spawn(this.#o.sshdPath ?? SSHD_PATH, ['-D', '-e', '-f', config], {
        stdio: ['ignore', fd, fd],
        env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...localVmEnv(spec.vmDir) },
      });
    } finally {
      closeSync(fd);
    }
    const r: Running = {
      vm: spec.vm,
      instanceId: spec.instanceId,
      child,
      address: { host: '127.0.0.1', port },
      gone: false,
      exited: new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.once('error', () => resolve());
      }),
    };
    void r.exited.then(() => {
      r.gone = true;
      if (this.#running.get(spec.vm) === r)
        this.#o.logger?.warn(
          { vm: spec.vm, pid: child.pid, code: child.exitCode, signal: child.signalCode, log: join(spec.vmDir, 'sshd.log') },
          'local sshd exited; the VM has no SSH endpoint until its agent starts again',
        );
    });
    this.#running.set(spec.vm, r);
    if (!(await listening(r))) {
      await this.stop(spec.vm);
      throw new Error(`sshd of VM '${spec.vm}' did not start listening on 127.0.0.1:${port}; see ${join(spec.vmDir, 'sshd.log')}`);
    }
    this.#o.logger?.info({ vm: spec.vm, pid: child.pid, port }, 'local sshd started');
    return r.address;
  }

  /** Stops the VM's sshd (SIGTERM, SIGKILL after a grace) and waits for it. */
  async stop(vm: string): Promise<void> {
    const r = this.#running.get(vm);
    if (r === undefined) return;
    this.#running.delete(vm);
    if (!r.gone) {
      r.child.kill('SIGTERM');
      const late = setTimeout(() => r.child.kill('SIGKILL'), kStopGraceMs);
      await r.exited;
      clearTimeout(late);
    }
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.#running.keys()].map((vm) => this.stop(vm)));
  }

  /** The SSH address of a VM, by its name or instance id (null: none runs). */
  address(instance: string): ListenAddress | null {
    for (const r of this.#running.values()) if (!r.gone && (r.vm === instance || r.instanceId === instance)) return r.address;
    return null;
  }

  async #files(dir: string, vm: string): Promise<void> {
    await mkdir(join(dir, 'principals'), { recursive: true, mode: 0o700 });
    const hostKey = join(dir, 'ssh_host_ed25519_key');
    const hasKey = await stat(hostKey).then(
      () => true,
      () => false,
    );
    if (!hasKey) await execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', `sandboxd-${vm}`, '-f', hostKey]);
    await copyFile(this.#o.caPublicKeyPath, join(dir, 'ca.pub'));
    const principals = this.#o.principals.length > 0 ? this.#o.principals : [this.#o.user];
    await writeFile(join(dir, 'principals', this.#o.user), `${principals.join('\n')}\n`, { mode: 0o644 });
  }
}

/** The sshd_config of a local VM (see the file comment). */
export function sshdConfig(dir: string, port: number, user: string): string {
  return [
    `ListenAddress 127.0.0.1`,
    `Port ${port}`,
    `HostKey ${join(dir, 'ssh_host_ed25519_key')}`,
    `PidFile none`,
    `TrustedUserCAKeys ${join(dir, 'ca.pub')}`,
    `AuthorizedPrincipalsFile ${join(dir, 'principals', '%u')}`,
    `AuthorizedKeysFile none`,
    `PubkeyAuthentication yes`,
    `PasswordAuthentication no`,
    `KbdInteractiveAuthentication no`,
    `HostbasedAuthentication no`,
    `UsePAM no`,
    `PermitRootLogin prohibit-password`,
    `AllowUsers ${user}`,
    // The files live under the state dir, whose owner and modes sshd's strict checks do not know.
    `StrictModes no`,
    `Subsystem sftp internal-sftp`,
    `LogLevel INFO`,
    '',
  ].join('\n');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** Polls until the sshd accepts a connection (true) or exits or takes too long (false). */
async function listening(r: Running): Promise<boolean> {
  const deadline = Date.now() + kReadyTimeoutMs;
  while (!r.gone && Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(r.address.port, r.address.host);
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return true;
    await new Promise((res) => setTimeout(res, 50));
  }
  return false;
}
