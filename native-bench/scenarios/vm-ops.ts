/**
 * vm-ops: VM operations per second on libvirt's test driver, and create-to-agent-ready latency,
 * through the real HTTP API of an in-process server, in workers mode (value) and in
 * SVC_ACTORS=inline (ceiling, the baseline), so ratio = workers / inline.
 *
 * Per mode: create VMs in parallel (each create completes when the VM runs and its local
 * sandbox-agent has connected over mTLS: that is create-to-agent-ready), then drive
 * stop/start cycles on all of them for the rest of the time (each call goes through the VM's
 * operation-queue actor and the hypervisor), then delete them all.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import hdr from 'hdr-histogram-js';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/load.js';
import { startServer, type ServerHandle } from '../../src/main.js';
import type { BenchScenario } from '../types.js';

const VMS_PER_MODE = 6;

interface ModeResult {
  opsPerSecond: number;
  ops: number;
  createP50Ms: number;
  createP99Ms: number;
  failures: string[];
}

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

async function waitOperation(base: string, id: string, signal: AbortSignal): Promise<Record<string, unknown>> {
  for (;;) {
    signal.throwIfAborted();
    const op = await json(await fetch(`${base}/api/v1/operations/${id}`));
    if (op['status'] === 'completed' || op['status'] === 'failed') return op;
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function runMode(mode: 'workers' | 'inline', seconds: number, signal: AbortSignal): Promise<ModeResult> {
  const stateDir = await mkdtemp(join(tmpdir(), `sandboxd-bench-vmops-${mode}-`));
  const config = loadConfig({
    SVC_STATE_DIR: stateDir,
    SVC_HTTP_ADDR: '127.0.0.1:0',
    SVC_WS_ADDR: '127.0.0.1:0',
    SVC_GRPC_ADDR: '127.0.0.1:0',
    SVC_ACTORS: mode,
    SVC_ACTOR_SHARDS: '1',
    SVC_AGENT_HEARTBEAT_SECONDS: '5',
  });
  let server: ServerHandle | undefined;
  const failures: string[] = [];
  const created: string[] = [];
  try {
    server = await startServer(config, pino({ level: 'silent' }));
    const base = `http://127.0.0.1:${server.ports.http}`;
    const latency = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 600_000, numberOfSignificantValueDigits: 3 });
    const tag = `${mode.slice(0, 1)}${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
    await Promise.all(
      Array.from({ length: VMS_PER_MODE }, async (_, i) => {
        const name = `agent-bench-${tag}-${i}`;
        const t0 = performance.now();
        const res = await fetch(`${base}/api/v1/vms`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name, profile: 'basic', vcpus: 1, memory_mb: 256, disk_gb: 1 }),
        });
        const body = await json(res);
        if (res.status !== 202) {
          failures.push(`create ${name}: ${res.status} ${JSON.stringify(body)}`);
          return;
        }
        created.push(name);
        const op = await waitOperation(base, (body['operation'] as { id: string }).id, signal);
        if (op['status'] !== 'completed') failures.push(`create ${name}: ${String(op['error'])}`);
        else latency.recordValue(Math.max(1, Math.round(performance.now() - t0)));
      }),
    );
    // Operations per second: stop/start cycles on every VM, all VMs in parallel.
    const deadline = performance.now() + seconds * 1000;
    const started = performance.now();
    let ops = 0;
    await Promise.all(
      created.map(async (name) => {
        while (performance.now() < deadline && !signal.aborted) {
          for (const action of ['destroy', 'start']) {
            const res = await fetch(`${base}/api/v1/vms/${name}/${action}`, { method: 'POST' });
            if (res.status !== 200) failures.push(`${action} ${name}: ${res.status} ${await res.text()}`);
            else ops++;
          }
        }
      }),
    );
    const elapsedS = (performance.now() - started) / 1000;
    return {
      opsPerSecond: elapsedS > 0 ? ops / elapsedS : 0,
      ops,
      createP50Ms: latency.getValueAtPercentile(50),
      createP99Ms: latency.getValueAtPercentile(99),
      failures,
    };
  } finally {
    if (server !== undefined) {
      const base = `http://127.0.0.1:${server.ports.http}`;
      await Promise.all(
        created.map((name) => fetch(`${base}/api/v1/vms/${name}?force=true&delete_disk=true`, { method: 'DELETE' }).catch(() => undefined)),
      );
      await server.stop().catch(() => undefined);
    }
    await rm(stateDir, { recursive: true, force: true });
  }
}

export const vmOps: BenchScenario = {
  name: 'vm-ops',
  description: 'VM operations/s on the test driver through the API (workers vs inline) and create-to-agent-ready latency',
  unit: 'ops/s',
  target: { ratioAtLeast: 1 },
  async run({ seconds, signal }) {
    const half = Math.max(1, seconds / 2);
    const workers = await runMode('workers', half, signal);
    const inline = await runMode('inline', half, signal);
    return {
      value: Math.round(workers.opsPerSecond * 10) / 10,
      ceiling: Math.round(inline.opsPerSecond * 10) / 10,
      extra: {
        vms: VMS_PER_MODE,
        ops: workers.ops,
        inlineOps: inline.ops,
        createToAgentReadyP50Ms: workers.createP50Ms,
        createToAgentReadyP99Ms: workers.createP99Ms,
        inlineCreateToAgentReadyP50Ms: inline.createP50Ms,
        inlineCreateToAgentReadyP99Ms: inline.createP99Ms,
        notes: 'ceiling is SVC_ACTORS=inline; ops are destroy/start pairs through each VM operation queue',
      },
      problems: [...workers.failures, ...inline.failures].slice(0, 10),
    };
  },
};
