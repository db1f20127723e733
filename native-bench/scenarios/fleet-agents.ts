/**
 * Client-process side of the `fleet` scenario: many simulated agents, each on its own mTLS
 * HTTP/2 connection, connected `concurrency` at a time until `count` are registered or the
 * deadline passes, then heartbeating every `heartbeatMs` (staggered) until fleet.stop.
 */
import { performance } from 'node:perf_hooks';
import { SimAgent, type SimAgentTls } from './sim-agent.js';

type Args = Record<string, unknown>;

let fleet: SimAgent[] = [];
let beat: NodeJS.Timeout | undefined;

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
  // Heartbeats: every agent once per heartbeatMs, spread over the interval in 20 slices.
  const heartbeatMs = Number(a['heartbeatMs']);
  let slice = 0;
  clearInterval(beat);
  beat = setInterval(() => {
    const n = fleet.length;
    for (let i = slice; i < n; i += 20) fleet[i]?.heartbeat();
    slice = (slice + 1) % 20;
  }, heartbeatMs / 20);
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

export function stopFleet(): Promise<null> {
  clearInterval(beat);
  beat = undefined;
  for (const agent of fleet) agent.close();
  fleet = [];
  return Promise.resolve(null);
}
