/**
 * vm-ops: VM operations per second on libvirt's test driver, and create-to-agent-ready latency,
 * through the real HTTP API of in-process servers, in workers mode (value) and in
 * SVC_ACTORS=inline (ceiling, the baseline), so ratio = workers / inline.
 *
 * Both servers run in this process for the whole scenario, each on a test driver of its own. Each gets VMS_PER_MODE VMs, created
 * in parallel (each create completes when the VM runs and its local sandbox-agent has connected
 * over mTLS: that is create-to-agent-ready). Then the two modes take turns in rounds (W I I W I W W I,
 * so a load that drifts during the run hits both alike): in its round a mode drives destroy/start
 * cycles on all its VMs (each call goes through the VM's operation-queue actor, the hypervisor
 * and the VM's local agent process); the other server idles. ops/s of a mode = its ops ÷ the time
 * its rounds took (a round ends when the last call started before its deadline has answered).
 * Finally both servers stop (their test drivers forget the VMs; the VMs' local agents end with them).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import hdr from 'hdr-histogram-js';
import { pino } from 'pino';
import { startServer, type ServerHandle } from '../../src/main.js';
import { loopbackConfig } from '../../test/support/test-config.js';
import type { BenchScenario } from '../types.js';

const VMS_PER_MODE = 6;
/** Rounds per run, in the order W I I W I W W I (cancels a load that drifts linearly or bends once). */
const ORDER = 'WIIWIWWI';

type Mode = 'workers' | 'inline';

interface Bed {
  readonly mode: Mode;
  readonly server: ServerHandle;
  readonly base: string;
  readonly stateDir: string;
  readonly vms: string[];
  readonly failures: string[];
  createP50Ms: number;
  createP99Ms: number;
  ops: number;
  busyMs: number;
  /** Event-loop active time of the main thread during this bed's rounds, ms. */
  mainActiveMs: number;
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

async function startBed(mode: Mode, signal: AbortSignal): Promise<Bed> {
  const stateDir = await mkdtemp(join(tmpdir(), `sandboxd-bench-vmops-${mode}-`));
  // A test driver of its own (loaded from a node file, unlike test:///default which every
  // connection in this process shares): neither server sees, lists or gets events of the other's VMs.
  const hostFile = join(stateDir, 'host.xml');
  await writeFile(hostFile, '<node>\n</node>\n');
  const config = loopbackConfig(stateDir, {
    SVC_HYPERVISOR_URI: `test://${hostFile}`,
    SVC_ACTORS: mode,
    SVC_ACTOR_SHARDS: '1',
    SVC_AGENT_HEARTBEAT_SECONDS: '5',
  });
  let server: ServerHandle;
  try {
    server = await startServer(config, pino({ level: 'silent' }));
  } catch (err) {
    await rm(stateDir, { recursive: true, force: true });
    throw err;
  }
  const bed: Bed = {
    mode,
    server,
    base: `http://127.0.0.1:${server.ports.http}`,
    stateDir,
    vms: [],
    failures: [],
    createP50Ms: 0,
    createP99Ms: 0,
    ops: 0,
    busyMs: 0,
    mainActiveMs: 0,
  };
  const latency = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 600_000, numberOfSignificantValueDigits: 3 });
  const tag = `${mode.slice(0, 1)}${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
  await Promise.all(
    Array.from({ length: VMS_PER_MODE }, async (_, i) => {
      const name = `agent-bench-${tag}-${i}`;
      const t0 = performance.now();
      const res = await fetch(`${bed.base}/api/v1/vms`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name, profile: 'basic', vcpus: 1, memory_mb: 256, disk_gb: 1 }),
      });
      const body = await json(res);
      if (res.status !== 202) {
        bed.failures.push(`${mode}: create ${name}: ${res.status} ${JSON.stringify(body)}`);
        return;
      }
      bed.vms.push(name);
      const op = await waitOperation(bed.base, (body['operation'] as { id: string }).id, signal);
      if (op['status'] !== 'completed') bed.failures.push(`${mode}: create ${name}: ${JSON.stringify(op['error'])}`);
      else latency.recordValue(Math.max(1, Math.round(performance.now() - t0)));
    }),
  );
  bed.createP50Ms = latency.getValueAtPercentile(50);
  bed.createP99Ms = latency.getValueAtPercentile(99);
  return bed;
}

/**
 * One round: destroy/start cycles on every VM of the bed, all VMs in parallel, until `ms` have
 * passed (at least one cycle each). An uncounted round leaves the bed's figures as they were.
 */
async function round(bed: Bed, ms: number, signal: AbortSignal, counted = true): Promise<void> {
  const elu = performance.eventLoopUtilization();
  const started = performance.now();
  const ops0 = bed.ops;
  const deadline = started + ms;
  await Promise.all(
    bed.vms.map(async (name) => {
      // At least one pair per VM (the warm-up asks for no more).
      do {
        for (const action of ['destroy', 'start']) {
          const res = await fetch(`${bed.base}/api/v1/vms/${name}/${action}`, { method: 'POST' });
          if (res.status !== 200) bed.failures.push(`${bed.mode}: ${action} ${name}: ${res.status} ${await res.text()}`);
          else {
            await res.arrayBuffer();
            bed.ops++;
          }
        }
      } while (performance.now() < deadline && !signal.aborted);
    }),
  );
  if (!counted) {
    bed.ops = ops0;
    return;
  }
  bed.busyMs += performance.now() - started;
  bed.mainActiveMs += performance.eventLoopUtilization(elu).active;
}

/** Stops the server: its in-process test driver forgets the VMs, and their local agents end with it. */
async function stopBed(bed: Bed): Promise<void> {
  await bed.server.stop().catch(() => undefined);
  await rm(bed.stateDir, { recursive: true, force: true });
}

const perSecond = (bed: Bed): number => (bed.busyMs > 0 ? (bed.ops * 1000) / bed.busyMs : 0);
const mainMsPerOp = (bed: Bed): number => (bed.ops > 0 ? Math.round((bed.mainActiveMs / bed.ops) * 100) / 100 : 0);
const round1 = (x: number): number => Math.round(x * 10) / 10;

export const vmOps: BenchScenario = {
  name: 'vm-ops',
  description:
    'VM operations/s on the test driver through the API (workers vs inline, alternating rounds) and create-to-agent-ready latency',
  unit: 'ops/s',
  target: { ratioAtLeast: 1 },
  async run({ seconds, signal }) {
    const beds: Bed[] = [];
    try {
      // One server after the other: set up side by side, twelve agents booting at once starved the
      // main thread on a loaded machine until libvirt reads overran their budget and a server's
      // hypervisor circuit opened (every later call 503).
      const t0 = performance.now();
      beds.push(await startBed('workers', signal));
      beds.push(await startBed('inline', signal));
      const [workers, inline] = beds as [Bed, Bed];
      // Three quarters of --seconds in rounds: each round also finishes the pairs in flight at its end.
      const roundMs = (0.75 * Math.max(2, seconds) * 1000) / ORDER.length;
      // Uncounted warm-up: one pair per VM in each mode (JIT, first connections of fresh agents).
      await round(workers, 0, signal, false);
      await round(inline, 0, signal, false);
      const setupMs = performance.now() - t0;
      const load0 = loadavg()[0]!;
      for (const m of ORDER) {
        if (signal.aborted) break;
        await round(m === 'W' ? workers : inline, roundMs, signal);
      }
      signal.throwIfAborted();
      for (const b of beds) if (b.ops === 0) throw new Error(`no ${b.mode} operation succeeded: ${b.failures[0] ?? 'no VM was created'}`);
      const load1 = loadavg()[0]!;
      return {
        value: round1(perSecond(workers)),
        ceiling: round1(perSecond(inline)),
        extra: {
          vms: VMS_PER_MODE,
          rounds: ORDER.length,
          ops: workers.ops,
          inlineOps: inline.ops,
          createToAgentReadyP50Ms: workers.createP50Ms,
          createToAgentReadyP99Ms: workers.createP99Ms,
          inlineCreateToAgentReadyP50Ms: inline.createP50Ms,
          inlineCreateToAgentReadyP99Ms: inline.createP99Ms,
          mainMsPerOp: mainMsPerOp(workers),
          inlineMainMsPerOp: mainMsPerOp(inline),
          loadAvg1m: [round1(load0), round1(load1)],
          setupMs: Math.round(setupMs),
          notes:
            'ceiling is SVC_ACTORS=inline, both servers in this process, rounds alternating W I I W I W W I; ops are destroy/start calls through each VM operation queue',
        },
        problems: [...workers.failures, ...inline.failures].slice(0, 10),
      };
    } finally {
      await Promise.all(beds.map((b) => stopBed(b)));
    }
  },
};
