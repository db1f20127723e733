/**
 * vm-real: create-to-agent-ready of real VMs. Builds (or reuses) the minimal image, prepares the
 * host (libvirtd, virtlogd, an isolated network of its own), starts sandboxd on qemu:///system and
 * creates VMs one after another through the HTTP API, each timed from POST /api/v1/vms to its
 * operation completing (= the guest's agent connected over mTLS), then deletes it with its disk.
 * Value: p50 in ms; extra: p95, samples, accelerator (kvm or tcg, and why). Needs root and QEMU.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { loadConfig } from '../../src/config/load.js';
import { prepareHost, removeNetwork } from '../../src/host/prepare.js';
import { buildMinimalImage } from '../../src/image/build-minimal.js';
import { findPackageRoot } from '../../src/image/command.js';
import { startServer } from '../../src/main.js';
import type { BenchScenario } from '../types.js';

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

export const vmReal: BenchScenario = {
  name: 'vm-real',
  description: 'real VM (qemu:///system, minimal image) create → agent connected over mTLS, p50 ms (p95 and accelerator in extra)',
  unit: 'ms',
  target: { valueAtMost: 30_000 },
  async run({ seconds, signal }) {
    if (process.getuid?.() !== 0) throw new Error('vm-real needs root (libvirt qemu:///system)');
    const tree = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
    const image = await buildMinimalImage({ outDir: join(tmpdir(), 'sandboxd-realvm-images'), agentTree: tree, packageRoot: findPackageRoot(tree) });
    const net = { name: `sbxbench-${process.pid}`, bridge: `sbxb${process.pid % 100000}`, hostAddress: '192.168.241.1' };
    const prep = await prepareHost({ network: net });
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-vmreal-'));
    await chmod(dir, 0o711);
    const port = await freePort();
    const config = loadConfig({
      SVC_STATE_DIR: dir, SVC_HTTP_ADDR: '127.0.0.1:0', SVC_WS_ADDR: '127.0.0.1:0', SVC_GRPC_ADDR: `0.0.0.0:${port}`,
      SVC_HYPERVISOR_URI: 'qemu:///system', SVC_VM_AGENT_SERVER_ADDR: `${net.hostAddress}:${port}`,
      SVC_VM_BASE_IMAGE: join(image.dir, 'disk.ext4'), SVC_VM_NETWORK: net.name, SVC_VM_AGENT_CONNECT_TIMEOUT_SECONDS: '180',
      SVC_HYPERVISOR_WRITE_BUDGET_MS: '60000', SVC_HYPERVISOR_READ_BUDGET_MS: '20000', LOG_LEVEL: 'silent',
    });
    const server = await startServer(config, pino({ level: 'silent' }));
    const base = `http://127.0.0.1:${server.ports.http}`;
    const samples: number[] = [];
    const problems: string[] = [];
    try {
      // At least 3 samples; about `seconds` of measuring beyond that (each VM takes seconds under TCG).
      const until = Date.now() + seconds * 1000;
      for (let i = 0; (i < 3 || Date.now() < until) && i < 20 && !signal.aborted; i++) {
        const name = `agent-bench-${i}`;
        const t0 = performance.now();
        const r = await fetch(`${base}/api/v1/vms`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name, profile: 'basic', vcpus: 1, memory_mb: 512, disk_gb: 2 }) });
        const id = ((await r.json()) as { operation?: { id: string } }).operation?.id;
        for (;;) {
          if (id === undefined || signal.aborted) break;
          const op = (await (await fetch(`${base}/api/v1/operations/${id}`)).json()) as { status: string };
          if (op.status === 'completed') {
            samples.push(performance.now() - t0);
            break;
          }
          if (op.status === 'failed') {
            problems.push(`${name}: ${JSON.stringify(op).slice(0, 300)}`);
            break;
          }
          await new Promise((res) => setTimeout(res, 100));
        }
        await fetch(`${base}/api/v1/vms/${name}?force=true&delete_disk=true`, { method: 'DELETE' });
      }
    } finally {
      await server.stop();
      await removeNetwork(net.name, net.bridge);
      for (const pid of Object.values(prep.started)) {
        try { process.kill(pid, 'SIGTERM'); } catch { /* gone */ }
      }
      await rm(dir, { recursive: true, force: true });
    }
    const sorted = [...samples].sort((a, b) => a - b);
    return {
      value: Math.round(percentile(sorted, 50)),
      ceiling: null,
      extra: { p95_ms: Math.round(percentile(sorted, 95)), samples: samples.length, accelerator: prep.accelerator, accelerator_reason: prep.acceleratorReason, image_reused: image.reused },
      problems,
    };
  },
};
