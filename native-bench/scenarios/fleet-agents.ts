/**
 * Client-process side of the `fleet` scenario: many simulated agents, each on its own mTLS
 * HTTP/2 connection, connected `concurrency` at a time until `count` are registered or the
 * deadline passes. Each agent heartbeats every `heartbeatMs` from its registration on (as a real
 * agent does), staggered over the interval in 20 slices, until fleet.stop.
 */
import { performance } from 'node:perf_hooks';
import { SimAgent, type SimAgentTls } from './sim-agent.js';

type Args = Record<string, unknown>;

const kSlices = 20;

let fleet: SimAgent[] = [];
let beat: NodeJS.Timeout | undefined;
let sent = 0;
let blocked = 0;

function startBeating(heartbeatMs: number): void {
  clearInterval(beat);
  let slice = 0;
  beat = setInterval(() => {
    const n = fleet.length;
    for (let i = slice; i < n; i += kSlices) {
      sent++;
      // false: grpc-js buffers it (the connection's window is full); counted, never dropped
      if (fleet[i]?.heartbeat() === false) blocked++;
    }
    slice = (slice + 1) % kSlices;
  }, heartbeatMs / kSlices);
}

export async function runFleet(a: Args): Promise<Record<string, unknown>> {
  const count = Number(a['count']);
  const concurrency = Number(a['concurrency']);
  const deadline = performance.now() + Number(a['deadlineMs']);
  const tls = a['tls'] as SimAgentTls;
  const prefix = String(a['prefix']);
  const regMs: number[] = [];
  let failed = 0;
  let next = 0;
  const start = performance.now();
  const cpu0 = process.cpuUsage();
  startBeating(Number(a['heartbeatMs']));
  const worker = async (): Promise<void> => {
    while (next < count && performance.now() < deadline) {
      const i = next++;
      const t0 = performance.now();
      const agent = new SimAgent({ target: String(a['target']), tls, agentId: `${prefix}${i}`, instanceId: String(a['instanceId']) });
      agent.register();
      const ok = await Promise.race([agent.acked.then(() => true), agent.ended.then(() => false)]);
      if (ok) {
        regMs.push(performance.now() - t0);
        fleet.push(agent);
      } else {
        failed++;
        agent.close();
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  regMs.sort((x, y) => x - y);
  const at = (p: number): number => Math.round((regMs[Math.min(regMs.length - 1, Math.floor((p / 100) * regMs.length))] ?? 0) * 10) / 10;
  return {
    registered: regMs.length,
    failed,
    seconds,
    regP50Ms: at(50),
    regP99Ms: at(99),
    rssBytes: process.memoryUsage().rss,
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
}

/** Heartbeats sent so far and how many of them found their stream's buffer full. */
export function fleetStats(): Promise<{ agents: number; heartbeats: number; blocked: number; rssBytes: number }> {
  return Promise.resolve({ agents: fleet.length, heartbeats: sent, blocked, rssBytes: process.memoryUsage().rss });
}

export function stopFleet(): Promise<null> {
  clearInterval(beat);
  beat = undefined;
  for (const agent of fleet) agent.close();
  fleet = [];
  sent = 0;
  blocked = 0;
  return Promise.resolve(null);
}
