/**
 * vm-real: create-to-agent-ready of real VMs. Builds (or reuses) the minimal image, prepares the
 * host (libvirtd, virtlogd, an isolated network of its own), starts sandboxd on qemu:///system and
 * creates VMs one after another through the HTTP API, each timed from POST /api/v1/vms to its
 * operation completing (= the guest's agent connected over mTLS), then deletes it with its disk.
 * Value: p50 in ms; extra: p95, samples, accelerator (kvm or tcg, and why), and the boot phases.
 * Needs root and QEMU.
 *
 * Phases (ms after the POST, each VM printed on stderr as it completes, p50s in the extras):
 *   qemu_up     the hypervisor's vm.started event (domain defined, QEMU running)
 *   init        /init's first console line (the kernel booted)
 *   agent_exec  /init starts node (modules loaded, fw_cfg read, network up, disk mounted)
 *   agent_log   the agent's first log line (node started and loaded the agent)
 *   connected   the agent.connected event (mTLS + HTTP/2 stream up)
 *   registered  the agent.registered event
 * Console lines are timed by the host when they appear in the serial console file (polled every
 * 20 ms), events by the server's own timestamps: one clock for all.
 *
 * SANDBOXD_VM_REAL_SAMPLES sets the minimum number of VMs (default 3): 1 to look at the phases of
 * a single boot while changing the guest image. SANDBOXD_VM_REAL_IMAGE=DIR boots an image folder
 * built earlier instead of building the current one (before/after comparisons in one sitting).
 */
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { startRealVmEnv } from '../../test/support/realvm.js';
import type { BenchScenario, JsonValue } from '../types.js';

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

/** The phases in boot order. */
export const BOOT_PHASES = ['qemu_up', 'init', 'agent_exec', 'agent_log', 'connected', 'registered'] as const;
export type BootPhase = (typeof BOOT_PHASES)[number];

/** Console markers: the phase a line starting with it marks. */
const CONSOLE_MARKERS: ReadonlyArray<[BootPhase, (line: string) => boolean]> = [
  ['init', (l) => l.startsWith('sbx-init:')],
  ['agent_exec', (l) => l.startsWith('sbx-init: starting sandbox-agent')],
  ['agent_log', (l) => l.startsWith('{') && l.includes('sandbox-agent starting')],
];

/**
 * Watches a VM's serial console file from the host: the host time (epoch ms) at which each
 * marker's first line appeared, and the guest uptimes /init prints (`up=<seconds>`).
 */
class ConsoleWatch {
  readonly seen = new Map<BootPhase, number>();
  readonly uptimes: Record<string, number> = {};
  /** The loader's line when V8 refused the image's code cache (the agent then compiles everything). */
  cacheRejected = false;
  #offset = 0;
  #partial = '';
  #timer: NodeJS.Timeout;
  #busy = false;

  constructor(private readonly path: string) {
    this.#timer = setInterval(() => void this.#poll(), 20);
  }

  async #poll(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const fh = await open(this.path, 'r').catch(() => null);
      if (fh === null) return;
      try {
        const buf = Buffer.alloc(64 * 1024);
        for (;;) {
          const { bytesRead } = await fh.read(buf, 0, buf.length, this.#offset);
          if (bytesRead === 0) break;
          this.#offset += bytesRead;
          this.#lines(buf.subarray(0, bytesRead).toString('utf8'), Date.now());
        }
      } finally {
        await fh.close();
      }
    } finally {
      this.#busy = false;
    }
  }

  #lines(text: string, now: number): void {
    const parts = (this.#partial + text).split('\n');
    this.#partial = parts.pop() ?? '';
    for (const raw of parts) {
      const line = raw.replace(/\r$/, '');
      for (const [phase, test] of CONSOLE_MARKERS) if (!this.seen.has(phase) && test(line)) this.seen.set(phase, now);
      if (line.includes('rejected the code cache')) this.cacheRejected = true;
      const m = /^sbx-init: (\S+).* up=([\d.]+)/.exec(line);
      if (m?.[1] !== undefined && m[2] !== undefined && !(m[1] in this.uptimes)) this.uptimes[m[1]] = Number(m[2]);
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#poll();
  }
}

interface EventLine {
  event_type: string;
  timestamp: string;
}

/** Epoch ms of the first event of `type` for the VM/agent `name`, or undefined. */
async function eventTime(base: string, type: string, filter: 'vm_name' | 'agent_id', name: string): Promise<number | undefined> {
  const r = await fetch(`${base}/api/v1/events?${filter}=${encodeURIComponent(name)}&event_type=${type}&limit=10`);
  const events = ((await r.json()) as { events?: EventLine[] }).events ?? [];
  const e = events.find((x) => x.event_type === type);
  return e === undefined ? undefined : Date.parse(e.timestamp);
}

export const vmReal: BenchScenario = {
  name: 'vm-real',
  description:
    'real VM (qemu:///system, minimal image) create → agent connected over mTLS, p50 ms (p95, accelerator and boot phases in extra)',
  unit: 'ms',
  target: { valueAtMost: 6_000 },
  async run({ seconds, signal }) {
    if (process.getuid?.() !== 0) throw new Error('vm-real needs root (libvirt qemu:///system)');
    const minSamples = Math.max(1, Number(process.env['SANDBOXD_VM_REAL_SAMPLES'] ?? 3) || 3);
    // The same set-up as the real-VM tests (image, libvirtd, a network of its own, the server).
    // SANDBOXD_VM_REAL_IMAGE: boot an image folder built earlier (e.g. by an older commit) instead.
    const imageDir = process.env['SANDBOXD_VM_REAL_IMAGE'];
    const env = await startRealVmEnv('bn', imageDir !== undefined && imageDir !== '' ? { imageDir } : {});
    const base = `http://127.0.0.1:${env.server.ports.http}`;
    const samples: number[] = [];
    const phases = new Map<BootPhase, number[]>(BOOT_PHASES.map((p) => [p, []]));
    const guestUptimes = new Map<string, number[]>();
    const problems: string[] = [];
    try {
      // At least minSamples; about `seconds` of measuring beyond that (each VM takes seconds under TCG).
      const until = Date.now() + seconds * 1000;
      for (let i = 0; (i < minSamples || Date.now() < until) && i < 20 && !signal.aborted; i++) {
        const name = `agent-bench-${i}`;
        const watch = new ConsoleWatch(join(env.dir, 'vms', name, 'console.log'));
        const wall0 = Date.now();
        const t0 = performance.now();
        let elapsed: number | undefined;
        try {
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
              elapsed = performance.now() - t0;
              samples.push(elapsed);
              break;
            }
            if (op.status === 'failed') {
              problems.push(`${name}: ${JSON.stringify(op).slice(0, 300)}`);
              break;
            }
            await new Promise((res) => setTimeout(res, 100));
          }
        } finally {
          await watch.stop();
        }
        if (watch.cacheRejected) problems.push(`${name}: V8 rejected the agent's code cache (see its console)`);
        if (elapsed !== undefined) {
          const at = new Map<BootPhase, number | undefined>(watch.seen);
          at.set('qemu_up', await eventTime(base, 'vm.started', 'vm_name', name));
          at.set('connected', await eventTime(base, 'agent.connected', 'agent_id', name));
          at.set('registered', await eventTime(base, 'agent.registered', 'agent_id', name));
          const line: string[] = [];
          for (const p of BOOT_PHASES) {
            const t = at.get(p);
            if (t === undefined) continue;
            phases.get(p)?.push(t - wall0);
            line.push(`${p} ${((t - wall0) / 1000).toFixed(2)}`);
          }
          for (const [k, v] of Object.entries(watch.uptimes)) guestUptimes.set(k, [...(guestUptimes.get(k) ?? []), v]);
          const up = Object.entries(watch.uptimes).map(([k, v]) => `${k} ${v.toFixed(2)}`);
          process.stderr.write(
            `vm-real ${name}: ${(elapsed / 1000).toFixed(2)} s; host s after POST: ${line.join(', ')}; guest uptime s: ${up.join(', ')}\n`,
          );
        }
        await fetch(`${base}/api/v1/vms/${name}?force=true&delete_disk=true`, { method: 'DELETE' });
      }
    } finally {
      await env.stop();
    }
    const sorted = [...samples].sort((a, b) => a - b);
    const p50Of = (xs: readonly number[]): number =>
      Math.round(
        percentile(
          [...xs].sort((a, b) => a - b),
          50,
        ),
      );
    const phaseP50: Record<string, JsonValue> = {};
    for (const [p, xs] of phases) if (xs.length > 0) phaseP50[p] = p50Of(xs);
    const uptimeP50: Record<string, JsonValue> = {};
    for (const [k, xs] of guestUptimes) uptimeP50[k] = Math.round(p50Of(xs.map((x) => x * 1000)));
    return {
      value: Math.round(percentile(sorted, 50)),
      ceiling: null,
      extra: {
        p95_ms: Math.round(percentile(sorted, 95)),
        samples: samples.length,
        phases_p50_ms: phaseP50,
        guest_uptime_p50_ms: uptimeP50,
        accelerator: env.prep.accelerator,
        accelerator_reason: env.prep.acceleratorReason,
      },
      problems,
    };
  },
};
