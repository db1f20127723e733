/**
 * `sbx ssh INSTANCE [-- ssh args]`, `sbx ssh --print-config [INSTANCE]` and the hidden
 * `sbx ssh-proxy INSTANCE` (README "SSH connector").
 *
 * `sbx ssh` requests an SSH lease for the actor (POST /api/v2/gateway/ssh/leases) with the first
 * local public key (`-i`, else ~/.ssh/id_ed25519.pub, id_ecdsa.pub, id_rsa.pub), writes the
 * certificate of the answer into a private temporary directory (0700, removed when ssh ends) and
 * runs the system `ssh` with that certificate (CertificateFile, next to the user's own private
 * key: the private key is never copied) and a ProxyCommand that is sbx itself in ssh-proxy mode.
 *
 * `sbx ssh-proxy` speaks the connector's prelude to SVC_GATEWAY_SSH_CONNECT (default
 * 127.0.0.1:8124) and then pipes stdin/stdout to the connection. A refusal (the connector's JSON
 * error line) is printed as `sbx: CODE: message` and exits 1 instead of reaching ssh as garbage.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodePrelude, isPreludeName, type SshConnectorErrorLine } from '../../wire/ssh-connector.js';
import { int, str, UsageError } from '../args.js';
import type { CommandContext } from '../io.js';
import type { CommandDef } from './command.js';

export const DEFAULT_CONNECT = '127.0.0.1:8124';
/** Public keys tried in order when no -i is given (under ~/.ssh). */
const DEFAULT_KEYS = ['id_ed25519', 'id_ecdsa', 'id_rsa'];
const DEFAULT_USER = 'agent';
const DEFAULT_TTL_SECONDS = 900;

/** The lease record fields sbx ssh reads (spec part 2 "Gateway SSH lease"). */
interface SshLeaseAnswer {
  id: string;
  expires_at: string;
  certificate?: string | null;
}

/** A POSIX shell word (ProxyCommand runs through sh -c). */
function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:=@+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

function connectAddress(ctx: CommandContext, flag: string | undefined): string {
  return flag ?? (ctx.io.env.SVC_GATEWAY_SSH_CONNECT || DEFAULT_CONNECT);
}

/** The argv that runs this sbx again (node and the script). */
function selfArgv(ctx: CommandContext): readonly string[] {
  return ctx.io.self ?? [process.execPath, process.argv[1] ?? 'sbx'];
}

function proxyCommand(ctx: CommandContext, connectTo: string, instance: string): string {
  const argv = [...selfArgv(ctx), 'ssh-proxy', '--connect', connectTo, '--actor', ctx.settings.actor, instance];
  return argv.map(shellQuote).join(' ');
}

/** The public key to lease with: `-i` (the key or its .pub), else the first default that exists. */
async function findKey(ctx: CommandContext, flag: string | undefined): Promise<{ priv: string; pub: string } | null> {
  const exists = (p: string): Promise<boolean> =>
    stat(p).then(
      () => true,
      () => false,
    );
  if (flag !== undefined) {
    const priv = flag.endsWith('.pub') ? flag.slice(0, -4) : flag;
    if (!(await exists(`${priv}.pub`))) throw new UsageError(`no public key ${priv}.pub next to ${priv}`);
    return { priv, pub: `${priv}.pub` };
  }
  const home = ctx.io.env.HOME;
  if (home === undefined || home === '') return null;
  for (const k of DEFAULT_KEYS) {
    const priv = join(home, '.ssh', k);
    if (await exists(`${priv}.pub`)) return { priv, pub: `${priv}.pub` };
  }
  return null;
}

/** The instance and the actor go into the prelude, ssh options and a shell command line: only plain names. */
function checkNames(ctx: CommandContext, instance: string): void {
  for (const [what, v] of [
    ['instance', instance],
    ['actor', ctx.settings.actor],
  ] as const)
    if (!isPreludeName(v)) throw new UsageError(`${what} ${JSON.stringify(v)} is not a name of 1-256 characters [A-Za-z0-9_.@:+-]`);
}

const ssh: CommandDef = {
  noun: 'ssh',
  verb: '',
  summary: 'open an SSH session to an instance through the SSH connector, with a short-lived certificate from a lease',
  details: [
    'Examples: sbx ssh agent-a1b2        sbx ssh agent-a1b2 -- uname -a        sbx ssh agent-a1b2 -- -L 8080:127.0.0.1:80',
    'The connector is SVC_GATEWAY_SSH_CONNECT (default 127.0.0.1:8124); the actor is --actor, SVC_GATEWAY_SSH_ACTOR, the',
    "context's actor or role, or the OS user. Without a local public key no lease is requested (ssh uses what it has).",
    'Leases need an operator identity: SBX_SERVER=https://<admin listener> with SBX_OPERATOR_CERTS=DIR (sbx --help).',
    'sbx ssh --print-config [INSTANCE] prints an ssh_config block for your own ssh instead.',
  ].join('\n'),
  args: [
    { name: 'INSTANCE', required: false, description: 'instance (VM name or instance id, as the connector knows it)' },
    { name: 'SSH_ARGS', required: false, variadic: true, description: 'after --: passed to ssh (options, then a command)' },
  ],
  flags: [
    { name: 'print-config', type: 'boolean', description: 'print an ssh_config block and exit' },
    { name: 'user', short: 'l', type: 'string', value: 'USER', description: `login user (default ${DEFAULT_USER})` },
    { name: 'principal', type: 'string', value: 'NAME', description: 'certificate principal asked for (default: the login user)' },
    {
      name: 'identity',
      short: 'i',
      type: 'string',
      value: 'KEY',
      description: 'private key whose .pub is leased (default ~/.ssh/id_ed25519…)',
    },
    { name: 'ttl', type: 'number', value: 'SECONDS', description: `lease and certificate lifetime (default ${DEFAULT_TTL_SECONDS})` },
    {
      name: 'connect',
      type: 'string',
      value: 'HOST:PORT',
      description: `connector address (default SVC_GATEWAY_SSH_CONNECT, ${DEFAULT_CONNECT})`,
    },
    { name: 'no-lease', type: 'boolean', description: 'request no lease (a certificate you already have)' },
  ],
  async run(ctx, { args, flags }) {
    const instance = args[0];
    const connectTo = connectAddress(ctx, str(flags, 'connect'));
    const user = str(flags, 'user') ?? DEFAULT_USER;
    if (flags['print-config'] === true) {
      checkNames(ctx, instance ?? 'any');
      ctx.out(printConfig(ctx, connectTo, user, instance));
      return undefined;
    }
    if (instance === undefined) throw new UsageError('missing INSTANCE', 'usage: sbx ssh INSTANCE [-- ssh args]');
    checkNames(ctx, instance);
    const key = await findKey(ctx, str(flags, 'identity'));
    const sshArgs = ['-o', `ProxyCommand=${proxyCommand(ctx, connectTo, instance)}`, '-o', `HostKeyAlias=sbx-${instance}`, '-l', user];
    let tmp: string | null = null;
    try {
      if (key !== null && flags['no-lease'] !== true) {
        const lease = await ctx.api.requestJson<SshLeaseAnswer>(
          'POST',
          '/api/v2/gateway/ssh/leases',
          {
            actor: ctx.settings.actor,
            instance_id: instance,
            principal: str(flags, 'principal') ?? user,
            access_mode: 'ssh',
            public_key: (await readFile(key.pub, 'utf8')).trim(),
            ttl_seconds: int(flags, 'ttl', 1, 86_400) ?? DEFAULT_TTL_SECONDS,
          },
          { signal: ctx.signal },
        );
        ctx.err(`sbx: lease ${lease.id} for ${ctx.settings.actor} on ${instance} until ${lease.expires_at}`);
        sshArgs.push('-i', key.priv, '-o', 'IdentitiesOnly=yes');
        if (typeof lease.certificate === 'string' && lease.certificate !== '') {
          tmp = await mkdtemp(join(tmpdir(), 'sbx-ssh-'));
          const cert = join(tmp, 'lease-cert.pub');
          await writeFile(cert, `${lease.certificate.trim()}\n`, { mode: 0o600 });
          sshArgs.push('-o', `CertificateFile=${cert}`);
        } else {
          ctx.err('sbx: the server signed no certificate (no SVC_GATEWAY_SSH_CA_KEY there); ssh tries the key alone');
        }
      }
      return await runSsh(sshArgs, instance, args.slice(1), ctx);
    } finally {
      if (tmp !== null) await rm(tmp, { recursive: true, force: true });
    }
  },
};

/** Runs ssh on the process's own terminal; resolves with its exit code. */
function runSsh(base: readonly string[], destination: string, extra: readonly string[], ctx: CommandContext): Promise<number> {
  // ssh [options] destination [command]: the options after -- go before the destination, the first
  // non-option word and what follows is the remote command.
  const opts: string[] = [];
  let i = 0;
  while (i < extra.length && (extra[i] as string).startsWith('-')) {
    const a = extra[i] as string;
    opts.push(a);
    // ssh's options that take a value (man ssh: bcDEeFIiJLlmOopQRSWw).
    if (/^-[bcDEeFIiJLlmOopQRSWw]$/.test(a) && i + 1 < extra.length) opts.push(extra[++i] as string);
    i++;
  }
  const argv = [...base, ...opts, destination, ...extra.slice(i)];
  return new Promise((resolve, reject) => {
    const child = spawn('ssh', argv, { stdio: 'inherit' });
    const onAbort = (): void => {
      child.kill('SIGTERM');
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    child.once('error', (err) => {
      ctx.signal.removeEventListener('abort', onAbort);
      reject(new Error(`could not run ssh: ${err.message} (install openssh-client)`));
    });
    child.once('exit', (code, signal) => {
      ctx.signal.removeEventListener('abort', onAbort);
      // ssh's own failures are 255; a signal ends it like one.
      resolve(code ?? (signal !== null ? 255 : 1));
    });
  });
}

function printConfig(ctx: CommandContext, connectTo: string, user: string, instance: string | undefined): string {
  const host = instance ?? '*.sbx';
  const target = instance ?? '%n';
  const argv = [...selfArgv(ctx), 'ssh-proxy', '--connect', connectTo, '--actor', ctx.settings.actor];
  return [
    `# sbx ssh --print-config: ssh through the sandboxd SSH connector at ${connectTo} as actor ${ctx.settings.actor}.`,
    '# The actor needs an active SSH lease for the instance, and ssh a certificate of it:',
    '# `sbx ssh INSTANCE` requests both; or POST /api/v2/gateway/ssh/leases and set CertificateFile.',
    `Host ${host}`,
    `  User ${user}`,
    `  ProxyCommand ${[...argv.map(shellQuote), instance === undefined ? '--strip-suffix .sbx %n' : shellQuote(target)].join(' ')}`,
    ...(instance !== undefined ? [`  HostKeyAlias sbx-${instance}`] : []),
    '',
  ].join('\n');
}

const sshProxy: CommandDef = {
  noun: 'ssh-proxy',
  verb: '',
  hidden: true,
  summary: "ssh's ProxyCommand: the connector prelude, then stdin/stdout piped to the connector",
  args: [{ name: 'INSTANCE', required: true, description: 'instance id sent in the prelude' }],
  flags: [
    {
      name: 'connect',
      type: 'string',
      value: 'HOST:PORT',
      description: `connector address (default SVC_GATEWAY_SSH_CONNECT, ${DEFAULT_CONNECT})`,
    },
    {
      name: 'strip-suffix',
      type: 'string',
      value: 'SUFFIX',
      description: 'removed from the end of INSTANCE (ssh_config patterns like *.sbx)',
    },
  ],
  async run(ctx, { args, flags }) {
    let instance = args[0] as string;
    const suffix = str(flags, 'strip-suffix');
    if (suffix !== undefined && instance.endsWith(suffix)) instance = instance.slice(0, -suffix.length);
    checkNames(ctx, instance);
    const address = connectAddress(ctx, str(flags, 'connect'));
    const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(address);
    if (m === null) throw new UsageError(`connector address ${JSON.stringify(address)} is not host:port`);
    const socket = await dialConnector(m[1] ?? m[2] ?? '', Number(m[3]));
    socket.write(encodePrelude({ actor: ctx.settings.actor, instance_id: instance, access_mode: 'ssh' }));
    return await proxy(ctx, socket);
  },
};

function dialConnector(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    // Half-open: ssh closing our stdin ends only the way up; sshd's last bytes still come down.
    const s = connect({ host, port, noDelay: true, allowHalfOpen: true });
    s.once('connect', () => {
      s.off('error', reject);
      resolve(s);
    });
    s.once('error', (err) => reject(new Error(`cannot reach the SSH connector at ${host}:${port}: ${err.message}`)));
  });
}

/**
 * Pipes the connection and stdin/stdout. The connector's first byte tells a refusal ('{': its
 * JSON error line) from sshd ("SSH-2.0-…"). Resolves with the exit code once the connection ends.
 */
function proxy(ctx: CommandContext, socket: Socket): Promise<number> {
  const { stdin, stdout } = ctx.io;
  return new Promise((resolve) => {
    let first = true;
    let refusal = '';
    let settled = false;
    const finish = (code: number): void => {
      if (settled) return;
      settled = true;
      stdin.unpipe(socket);
      stdin.pause();
      socket.destroy();
      resolve(code);
    };
    const onData = (chunk: Buffer): void => {
      if (first && chunk[0] === 0x7b) {
        refusal += chunk.toString('utf8');
        if (refusal.length > 8192 || refusal.includes('\n')) finish(reportRefusal(ctx, refusal));
        return;
      }
      first = false;
      socket.off('data', onData);
      stdout.write(chunk);
      socket.pipe(stdout, { end: false });
    };
    socket.on('data', onData);
    socket.once('end', () => finish(refusal !== '' ? reportRefusal(ctx, refusal) : 0));
    socket.once('error', (err) => {
      ctx.err(`sbx: the SSH connector connection failed: ${err.message}`);
      finish(1);
    });
    socket.once('close', () => finish(0));
    stdin.pipe(socket);
  });
}

function reportRefusal(ctx: CommandContext, text: string): number {
  try {
    const e = (JSON.parse(text.split('\n')[0] ?? '') as SshConnectorErrorLine).error;
    ctx.err(`sbx: ${e.code}: ${e.message}`);
  } catch {
    ctx.err('sbx: the SSH connector refused the connection');
  }
  return 1;
}

export const SSH_COMMANDS: readonly CommandDef[] = [ssh, sshProxy];
