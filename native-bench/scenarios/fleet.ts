/**
 * Scenario `fleet`: as many simulated agents as register within 0.8 × --seconds (goal 5,000), each
 * on its own mTLS HTTP/2 connection, spread over 4 client processes (50 connecting at a time in
 * each), then all heartbeating once a second for 0.15 × --seconds. Run it with --seconds 30 or
 * more to give 5,000 TLS handshakes on 2 cores the time they need.
 *
 * value  = agents registered (every one got its RegistrationAck) within the connect window.
 * extras = registration rate (agents/s) and the p50/p99 registration time; the server's RSS with
 *          the fleet connected (the bench process: main thread and shard workers) and the growth
 *          per agent; heartbeat handling latency p50/p99 (agent send → the agent actor's
 *          agent.heartbeat event back on the main thread; the simulated agent stamps its send time
 *          in µs into memory_used_bytes, which the event echoes); the same with
 *          SVC_ACTORS=inline (`inline`) and `workersVsInline` (inline hb p99 ÷ workers hb p99).
 *
 * All agents share one certificate (one instance id, distinct agent ids): issuing 5,000 would cost
 * more than the time bound; each agent is still its own connection, stream and actor.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import * as hdr from 'hdr-histogram-js';
import { AgentFrameKind, decodeJson, type AgentEventFrame } from '../../actors/protocol/agent-frames.js';
import type { BenchResult, BenchScenario } from '../types.js';
import { BenchClient, stopOnAbort } from './client-process.js';
import { startBenchServer } from './stream-server.js';

const GOAL = 5000;
const PROCESSES = 4;
const RSS_LIMIT_BYTES = 1.5 * 1024 ** 3;

interface FleetRun {
  registered: number;
  failed: number;
  seconds: number;
  regP50Ms: number;
  regP99Ms: number;
  rssMiB: number;
  rssPerAgentKiB: number;
  hbP50Ms: number;
  hbP99Ms: number;
  heartbeats: number;
  /** CPU time per registered agent while connecting: the server process (all threads), the client processes. */
  serverCpuPerAgentMs: number;
  clientCpuPerAgentMs: number;
}

async function runMode(mode: 'workers' | 'inline', seconds: number, signal: AbortSignal): Promise<FleetRun> {
  const hb = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  let measuring = false;
  const server = await startBenchServer({
    mode,
    heartbeatSeconds: 1,
    tap: (kind, _key, payload) => {
      if (!measuring || kind !== AgentFrameKind.kFrameAgentEvent) return;
      const ev = decodeJson<AgentEventFrame>(payload);
      if (ev.event_type !== 'agent.heartbeat') return;
      const sentUs = Number(ev.details['memory_used_bytes']);
      const nowUs = (performance.timeOrigin + performance.now()) * 1000;
      if (sentUs > 0) hb.recordValue(Math.max(1, Math.round(nowUs - sentUs)));
    },
  });
  const clients = Array.from({ length: PROCESSES }, () => BenchClient.start());
  for (const c of clients) stopOnAbort(c, signal);
  try {
    const tls = await server.agentTls('i-bench-fleet');
    global.gc?.();
    await sleep(200);
    const rssBefore = process.memoryUsage().rss;
    const share = Math.ceil(GOAL / PROCESSES);
    const cpu0 = process.cpuUsage();
    // Two modes in 3 × seconds + 10 s: each connects for 0.8 × seconds, heartbeats for 0.15 × seconds.
    const deadlineMs = seconds * 800;
    const results = await Promise.all(
      clients.map((c, p) =>
        c.call<{ registered: number; failed: number; seconds: number; regP50Ms: number; regP99Ms: number; cpuMs: number }>('fleet.run', {
          target: server.grpcTarget,
          tls,
          instanceId: 'i-bench-fleet',
          prefix: `${mode}-fleet-${p}-`,
          count: share,
          concurrency: 50,
          deadlineMs,
          heartbeatMs: 1000,
        }),
      ),
    );
    const registered = results.reduce((n, r) => n + r.registered, 0);
    const serverCpu = process.cpuUsage(cpu0);
    const perAgent = (ms: number): number => (registered > 0 ? Math.round((ms / registered) * 100) / 100 : 0);
    // heartbeats for a while with everyone connected
    measuring = true;
    await sleep(Math.max(1000, seconds * 150));
    measuring = false;
    const rss = process.memoryUsage().rss;
    const secs = Math.max(...results.map((r) => r.seconds));
    return {
      registered,
      failed: results.reduce((n, r) => n + r.failed, 0),
      seconds: Math.round(secs * 100) / 100,
      regP50Ms: Math.max(...results.map((r) => r.regP50Ms)),
      regP99Ms: Math.max(...results.map((r) => r.regP99Ms)),
      rssMiB: Math.round(rss / 1024 / 1024),
      rssPerAgentKiB: registered > 0 ? Math.round((rss - rssBefore) / registered / 102.4) / 10 : 0,
      hbP50Ms: Math.round(hb.getValueAtPercentile(50)) / 1000,
      hbP99Ms: Math.round(hb.getValueAtPercentile(99)) / 1000,
      heartbeats: hb.totalCount,
      serverCpuPerAgentMs: perAgent((serverCpu.user + serverCpu.system) / 1000),
      clientCpuPerAgentMs: perAgent(results.reduce((n, r) => n + r.cpuMs, 0)),
    };
  } finally {
    await Promise.all(clients.map((c) => c.call('fleet.stop').catch(() => undefined)));
    await Promise.all(clients.map((c) => c.stop()));
    await server.stop();
  }
}

export const fleet: BenchScenario = {
  name: 'fleet',
  description:
    'simulated agents on their own mTLS connections with heartbeats: how many register in the time bound (goal 5,000), RSS, heartbeat latency',
  unit: 'agents',
  target: { valueAtLeast: GOAL },
  async run({ seconds, signal }): Promise<BenchResult> {
    const workers = await runMode('workers', seconds, signal);
    const inline = await runMode('inline', seconds, signal);
    const problems: string[] = [];
    if (workers.rssMiB * 1024 * 1024 > RSS_LIMIT_BYTES) problems.push(`server RSS ${workers.rssMiB} MiB is over 1.5 GiB`);
    return {
      value: workers.registered,
      ceiling: null,
      extra: {
        goal: GOAL,
        registrationsPerSecond: Math.round(workers.registered / workers.seconds),
        workers: { ...workers },
        inline: { ...inline },
        workersVsInline: Math.round((inline.hbP99Ms / Math.max(0.001, workers.hbP99Ms)) * 100) / 100,
        notes:
          'workersVsInline = inline heartbeat p99 / workers heartbeat p99; RSS of the bench process (server); inline runs second in the same process, so its rssPerAgentKiB is understated',
      },
      problems,
    };
  },
};
