/**
 * Client-process side of the `fleet` scenario: many simulated agents, each on its own mTLS
 * HTTP/2 connection, connected `concurrency` at a time until `count` are registered or the
 * deadline passes. Each agent heartbeats every `heartbeatMs` from its registration on, at its own
 * phase (its registration time + k × heartbeatMs), as a real agent's own timer does, until
 * fleet.stop (heartbeat-schedule.ts: one timetable and one timer for the whole fleet, waking when
 * the first agent is due).
 * (Beating in 20 fixed slices of the interval instead sent a burst of 1/20 of the fleet at once
 * — 500 heartbeats every 250 ms at 10,000 agents — and the fleet's heartbeat latency measured
 * the server draining that burst: p50 ≈ half a burst, ≈ 10 ms.)
 */
import { performance } from 'node:perf_hooks';
import { HeartbeatSchedule } from './heartbeat-schedule.js';
import { SimAgent, type SimAgentTls } from './sim-agent.js';

type Args = Record<string, unknown>;

/**
 * Resolution of the heartbeat timer (ms): it sleeps until the next agent is due, at least this
 * long (a heartbeat's stamp is taken when it leaves, so lateness is not latency).
 */
const kTickMs = 5;

let fleet: SimAgent[] = [];
let schedule: HeartbeatSchedule<SimAgent> | undefined;
let beat: NodeJS.Timeout | undefined;
let sent = 0;
let blocked = 0;

function arm(): void {
  const next = schedule?.nextDueAt;
  if (beat !== undefined || next === undefined) return;
  beat = setTimeout(beatDue, Math.max(kTickMs, next - performance.now()));
}

function beatDue(): void {
  beat = undefined;
  schedule?.takeDue(performance.now(), (agent) => {
    sent++;
    // false: grpc-js buffers it (the connection's window is full); counted, never dropped
    if (!agent.heartbeat()) blocked++;
  });
  arm();
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
  const heartbeatMs = Number(a['heartbeatMs']);
  const timetable = (schedule ??= new HeartbeatSchedule<SimAgent>(heartbeatMs));
  const worker = async (): Promise<void> => {
    while (next < count && performance.now() < deadline) {
      const i = next++;
      const t0 = performance.now();
      const agent = new SimAgent({ target: String(a['target']), tls, agentId: `${prefix}${i}`, instanceId: String(a['instanceId']) });
      agent.register();
      const ok = await Promise.race([agent.acked.then(() => true), agent.ended.then(() => false)]);
      if (ok) {
        const now = performance.now();
        regMs.push(now - t0);
        fleet.push(agent);
        timetable.add(agent, now + heartbeatMs);
        arm();
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
  clearTimeout(beat);
  beat = undefined;
  for (const agent of fleet) agent.close();
  fleet = [];
  schedule = undefined;
  sent = 0;
  blocked = 0;
  return Promise.resolve(null);
}
