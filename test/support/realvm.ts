/**
 * Shared set-up of the realvm-*.test.ts files and the bench's vm-real scenario: the minimal image (built once, cached by content
 * under $TMPDIR/sandboxd-realvm-images), libvirtd + virtlogd and an isolated network of the test's
 * own (host prepare), and the whole server with SVC_HYPERVISOR_URI=qemu:///system, its gRPC
 * listener on every address so guests reach it at the bridge address. `skipReason` says LOUDLY why
 * QEMU cannot run here (not root, no qemu-system-x86_64 and no apt to install it).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildMinimalImage } from '../../src/image/build-minimal.js';
import { findPackageRoot } from '../../src/image/command.js';
import { prepareHost, removeNetwork, type NetworkSpec, type PrepareResult } from '../../src/host/prepare.js';
import pino from 'pino';
import { loadConfig } from '../../src/config/load.js';
import { ensureCa, type CaMaterial } from '../../src/identity/ca.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import { serverPort } from './ports.js';
import { errorMessage } from '../../src/util/error-message.js';

export interface RealVmEnv {
  /** The whole server (its state dir is `dir`). */
  server: ServerHandle;
  dir: string;
  /** The server's CA and gRPC address (for operator clients). */
  ca: CaMaterial;
  grpcTarget: string;
  net: NetworkSpec;
  prep: PrepareResult;
  imageDir: string;
  /** Polls the operation until completed (resolves its body) or failed (rejects with it). */
  waitOp(id: string, timeoutMs: number): Promise<Record<string, unknown>>;
  virsh(...args: string[]): string;
  stop(): Promise<void>;
}

/**
 * Why real VMs cannot run on this machine, or null. They run by default (CI is root on Debian);
 * SANDBOXD_REALVM_TESTS=0 turns them off explicitly, still with a loud line.
 */
export function skipReason(): string | null {
  if (process.env['SANDBOXD_REALVM_TESTS'] === '0') return 'REAL-VM TESTS SKIPPED: turned off by SANDBOXD_REALVM_TESTS=0';
  if (process.getuid?.() !== 0)
    return 'REAL-VM TESTS SKIPPED: they need root (libvirt qemu:///system, bridges); run npm test as root to include them';
  const has = (b: string): boolean => ['/usr/bin', '/usr/sbin', '/bin', '/sbin'].some((d) => existsSync(`${d}/${b}`));
  if (!has('qemu-system-x86_64') && !has('apt-get')) return 'REAL-VM TESTS SKIPPED: no qemu-system-x86_64 and no apt-get to install it';
  return null;
}

/**
 * @param opts.imageDir a built image folder to boot instead of building the minimal image (the bench's before/after).
 * @param opts.env more server settings (SSH leases, ...), over the harness's own; a function gets
 *   the test's network and a free port for the HTTP listener (a guest-reachable consume URL).
 */
export async function startRealVmEnv(
  tag: string,
  opts: {
    imageDir?: string;
    env?: Readonly<Record<string, string>> | ((net: NetworkSpec, ports: { http: number }) => Readonly<Record<string, string>>);
  } = {},
): Promise<RealVmEnv> {
  const tree = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const image =
    opts.imageDir !== undefined
      ? { dir: opts.imageDir }
      : await buildMinimalImage({
          outDir: join(tmpdir(), 'sandboxd-realvm-images'),
          agentTree: tree,
          packageRoot: findPackageRoot(tree),
        });
  const { net, prep } = await prepareOwnNetwork(tag);
  const dir = await mkdtemp(join(tmpdir(), 'sandboxd-realvm-'));
  await chmod(dir, 0o711); // QEMU (libvirt-qemu) traverses to the VMs' overlays and fw_cfg files
  const port = await serverPort();
  let server: ServerHandle;
  // The server's log (info and up) is kept in test-output/realvm-<tag>.log: the place to look
  // when a guest misbehaves on CI (secrets are redacted by the logger).
  const logLines: string[] = [];
  const logFile = join(findPackageRoot(tree), 'test-output', `realvm-${tag}.log`);
  try {
    const config = loadConfig({
      SVC_STATE_DIR: dir,
      SVC_HTTP_ADDR: '127.0.0.1:0',
      SVC_WS_ADDR: '127.0.0.1:0',
      SVC_ACTOR_SHARDS: '2',
      LOG_LEVEL: 'silent',
      SVC_ACTORS: process.env['TEST_SVC_ACTORS'] ?? 'workers',
      SVC_HYPERVISOR_URI: 'qemu:///system',
      SVC_GRPC_ADDR: `0.0.0.0:${port}`,
      SVC_ADMIN_ADDR: '127.0.0.1:0',
      SVC_VM_AGENT_SERVER_ADDR: `${net.hostAddress}:${port}`,
      SVC_VM_BASE_IMAGE: join(image.dir, 'disk.ext4'),
      SVC_VM_NETWORK: net.name,
      SVC_VM_AGENT_CONNECT_TIMEOUT_SECONDS: '180',
      SVC_HYPERVISOR_WRITE_BUDGET_MS: '120000',
      SVC_SHUTDOWN_DEADLINE_MS: '60000',
      SVC_HYPERVISOR_READ_BUDGET_MS: '20000',
      ...(typeof opts.env === 'function' ? opts.env(net, { http: await serverPort() }) : opts.env),
    });
    server = await startServer(config, pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) }));
  } catch (err) {
    await removeNetwork(net.name, net.bridge);
    throw err;
  }
  const base = `http://127.0.0.1:${server.ports.http}`;
  const ca = await ensureCa({ secretsDir: server.config.secretsDir, trustDomain: server.config.trustDomain });
  const virsh = (...args: string[]): string =>
    execFileSync('virsh', ['-c', 'qemu:///system', ...args], { encoding: 'utf8', timeout: 60_000 });
  return {
    server,
    dir,
    ca,
    grpcTarget: `127.0.0.1:${server.ports.grpc}`,
    net,
    prep,
    imageDir: image.dir,
    virsh,
    async waitOp(id, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const r = { body: (await (await fetch(`${base}/api/v1/operations/${id}`)).json()) as Record<string, unknown> };
        if (r.body['status'] === 'failed') throw new Error(`operation ${id} failed: ${JSON.stringify(r.body)}`);
        if (r.body['status'] === 'completed') return r.body;
        if (Date.now() > deadline) throw new Error(`operation ${id} still ${String(r.body['status'])} after ${timeoutMs} ms`);
        await new Promise((res) => setTimeout(res, 500));
      }
    },
    async stop() {
      // Every step runs even when one before it failed: nothing may be left behind.
      const problems: unknown[] = [];
      await server.stop().catch((err: unknown) => problems.push(err));
      await mkdir(dirname(logFile), { recursive: true });
      await writeFile(logFile, logLines.join(''));
      // Domains a failed test left (the server is down: nothing recreates them).
      try {
        for (const line of virsh('list', '--all', '--name').split('\n')) {
          const name = line.trim();
          if (!name.startsWith('agent-rv')) continue;
          try {
            virsh('destroy', name);
          } catch {
            /* not running */
          }
          try {
            virsh('undefine', name);
          } catch {
            /* gone */
          }
        }
      } catch (err) {
        problems.push(err);
      }
      await removeNetwork(net.name, net.bridge);
      for (const pid of Object.values(prep.started)) {
        try {
          process.kill(pid, 'SIGTERM');
        } catch {
          /* already gone */
        }
      }
      await rm(dir, { recursive: true, force: true });
      if (problems.length > 0) throw problems[0] instanceof Error ? problems[0] : new Error(String(problems[0]));
    },
  };
}

/**
 * Prepares the host with a network of the test's own: a 192.168.x.0/24 (x in 200-239, starting at
 * one the pid picks) that no host interface has yet. Another run may take the same one between the
 * look and libvirt's start (two real-VM files run at once, or a leftover of a run cut short): then
 * libvirt refuses ("already in use"), the network is removed and the next one tried.
 */
async function prepareOwnNetwork(tag: string): Promise<{ net: NetworkSpec; prep: PrepareResult }> {
  const first = process.pid % 40;
  let lastError: unknown = new Error('every 192.168.200-239.0/24 is in use on this host');
  for (let i = 0; i < 40; i++) {
    const n = 200 + ((first + i) % 40);
    if (subnetsInUse().has(n)) continue;
    const net: NetworkSpec = {
      name: `sbxt-${tag}-${process.pid}`,
      bridge: `sbxt${tag.slice(0, 3)}${process.pid % 10000}`.slice(0, 15),
      hostAddress: `192.168.${n}.1`,
    };
    try {
      return { net, prep: await prepareHost({ network: net }) };
    } catch (err) {
      await removeNetwork(net.name, net.bridge);
      if (!/already in use/i.test(errorMessage(err))) throw err;
      lastError = err;
    }
  }
  throw lastError;
}

/** The x of every 192.168.x.y/… address on this host's interfaces. */
function subnetsInUse(): Set<number> {
  const out = execFileSync('ip', ['-4', '-o', 'addr', 'show'], { encoding: 'utf8', timeout: 10_000 });
  return new Set([...out.matchAll(/\binet 192\.168\.(\d+)\./g)].map((m) => Number(m[1])));
}
