/**
 * Entry of the `dashboard` scenario's agent process (forked by dashboard-agents.ts, never
 * imported): `count` simulated agents, each on its own mTLS connection, that beat like the real
 * sandbox-agent (src/guest-agent/heartbeat.ts) — a Heartbeat then a Metrics message every `intervalMs`,
 * the agents' beats spread evenly over the interval.
 *
 * The metrics are plausible (CPU and memory random walks) and carry the update's per-agent
 * sequence number in the low 20 bits of memory_used_bytes, so the page can say which update a
 * row shows. CPU moves by 1–8 points every beat, so every update changes the row's text.
 *
 * IPC: {op: 'start', …} → {op: 'started', registered, failed, connectMs}; {op: 'stop'} →
 * {op: 'stopped', sends, ended, cpuMs} (sends: per agent, the Unix ms each update was written).
 */
import { performance } from 'node:perf_hooks';
import { v1 } from '../../proto/index.js';
import { kSeqBits } from './dashboard-stats.js';
import { SimAgent, type SimAgentTls } from './sim-agent.js';

interface StartArgs {
  target: string;
  tls: SimAgentTls;
  instanceId: string;
  prefix: string;
  count: number;
  concurrency: number;
  intervalMs: number;
  connectTimeoutMs: number;
}

interface Simulated {
  readonly agent: SimAgent;
  readonly sentMs: number[];
  cpuPercent: number;
  memoryMiB: number;
  uptimeS: number;
}

const MEMORY_TOTAL_BYTES = 4 * 1024 ** 3;
const DISK_TOTAL_BYTES = 20 * 1024 ** 3;
const SLICES = 20;

let fleet: Simulated[] = [];
let beat: NodeJS.Timeout | undefined;
let ended = 0;

function send(m: Record<string, unknown>): void {
  if (process.connected) process.send?.(m);
}

/** A step of 1–8 points that keeps the value within [lo, hi]. */
function walk(value: number, lo: number, hi: number): number {
  const step = 1 + Math.floor(Math.random() * 8);
  const up = value + step <= hi && (value - step < lo || Math.random() < 0.5);
  return up ? value + step : value - step;
}

function metricsMessage(s: Simulated, agentId: string, seq: number): Buffer {
  const u8 = v1.AgentMessage.encode({
    metrics: {
      agentId,
      timestampMs: Date.now(),
      cpuPercent: s.cpuPercent,
      memoryUsedBytes: s.memoryMiB * 1024 * 1024 + (seq % (1 << kSeqBits)),
      memoryTotalBytes: MEMORY_TOTAL_BYTES,
      diskUsedBytes: 6 * 1024 ** 3,
      diskTotalBytes: DISK_TOTAL_BYTES,
      loadAvg: [s.cpuPercent / 50, s.cpuPercent / 60, s.cpuPercent / 70],
      uptimeSeconds: s.uptimeS,
    },
  }).finish();
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
}

function beatOne(s: Simulated): void {
  s.cpuPercent = walk(s.cpuPercent, 10, 95);
  s.memoryMiB = walk(s.memoryMiB, 600, 3500);
  s.uptimeS++;
  s.agent.heartbeat();
  const seq = s.sentMs.length + 1;
  s.sentMs.push(Date.now());
  s.agent.writeRaw(metricsMessage(s, s.agent.agentId, seq));
}

async function start(a: StartArgs): Promise<void> {
  const t0 = performance.now();
  const deadline = t0 + a.connectTimeoutMs;
  let next = 0;
  let failed = 0;
  const connectOne = async (): Promise<void> => {
    while (next < a.count && performance.now() < deadline) {
      const i = next++;
      const agent = new SimAgent({
        target: a.target,
        tls: a.tls,
        agentId: `${a.prefix}${String(i).padStart(3, '0')}`,
        instanceId: a.instanceId,
      });
      agent.register();
      const timeout = new Promise<false>((resolve) => setTimeout(resolve, Math.max(0, deadline - performance.now()), false).unref());
      const ok = await Promise.race([agent.acked.then(() => true), agent.ended.then(() => false), timeout]);
      if (!ok) {
        failed++;
        agent.close();
        continue;
      }
      void agent.ended.then(() => ended++);
      fleet.push({
        agent,
        sentMs: [],
        cpuPercent: 10 + Math.floor(Math.random() * 60),
        memoryMiB: 800 + Math.floor(Math.random() * 2000),
        uptimeS: 1000 + i,
      });
    }
  };
  await Promise.all(Array.from({ length: a.concurrency }, connectOne));
  const connectMs = performance.now() - t0;
  // One slice of the fleet every intervalMs / SLICES: each agent beats once per interval.
  let slice = 0;
  beat = setInterval(() => {
    for (let i = slice; i < fleet.length; i += SLICES) beatOne(fleet[i]!);
    slice = (slice + 1) % SLICES;
  }, a.intervalMs / SLICES);
  send({ op: 'started', registered: fleet.length, failed, connectMs });
}

function stop(): void {
  clearInterval(beat);
  beat = undefined;
  const sends: Record<string, number[]> = {};
  for (const s of fleet) sends[s.agent.agentId] = s.sentMs;
  const cpu = process.cpuUsage();
  send({ op: 'stopped', sends, ended, cpuMs: (cpu.user + cpu.system) / 1000 });
  for (const s of fleet) s.agent.close();
  fleet = [];
}

process.on('message', (m: { op?: string; args?: StartArgs }) => {
  if (m.op === 'start' && m.args !== undefined) {
    start(m.args).catch((err: unknown) => send({ op: 'error', message: err instanceof Error ? err.message : String(err) }));
  } else if (m.op === 'stop') {
    stop();
  }
});
// The bench went away (or stopped us): nothing is left to report to.
process.on('disconnect', () => process.exit(0));
