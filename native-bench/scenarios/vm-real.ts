/**
 * vm-real: create-to-agent-ready of real VMs. Builds (or reuses) the minimal image, prepares the
 * host (libvirtd, virtlogd, an isolated network of its own), starts sandboxd on qemu:///system and
 * creates VMs one after another through the HTTP API, each timed from POST /api/v1/vms to its
 * operation completing (= the guest's agent connected over mTLS), then deletes it with its disk.
 * Value: p50 in ms; extra: p95, samples, accelerator (kvm or tcg, and why). Needs root and QEMU.
 */
import { startRealVmEnv } from '../../test/support/realvm.js';
import type { BenchScenario } from '../types.js';

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
    // The same set-up as the real-VM tests (image, libvirtd, a network of its own, the server).
    const env = await startRealVmEnv('bn');
    const base = `http://127.0.0.1:${env.server.ports.http}`;
    const samples: number[] = [];
    const problems: string[] = [];
    try {
      // At least 3 samples; about `seconds` of measuring beyond that (each VM takes seconds under TCG).
      const until = Date.now() + seconds * 1000;
      for (let i = 0; (i < 3 || Date.now() < until) && i < 20 && !signal.aborted; i++) {
        const name = `agent-bench-${i}`;
        const t0 = performance.now();
        const r = await fetch(`${base}/api/v1/vms`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name, profile: 'basic', vcpus: 1, memory_mb: 512, disk_gb: 2 }),
        });
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
      await env.stop();
    }
    const sorted = [...samples].sort((a, b) => a - b);
    return {
      value: Math.round(percentile(sorted, 50)),
      ceiling: null,
      extra: {
        p95_ms: Math.round(percentile(sorted, 95)),
        samples: samples.length,
        accelerator: env.prep.accelerator,
        accelerator_reason: env.prep.acceleratorReason,
      },
      problems,
    };
  },
};
