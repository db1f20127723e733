/**
 * Client-process side of the `fleet` scenario: many simulated agents, each on its own mTLS
 * HTTP/2 connection, connected `concurrency` at a time until `count` are registered or the
 * deadline passes. Each agent heartbeats every `heartbeatMs` from its registration on, at its own
 * phase (its registration time + k × heartbeatMs), as a real agent's own timer does, until
 * fleet.stop. One timer serves the whole fleet: agents wait in a queue ordered by due time (all
 * share the interval, so a beaten agent goes to the back) and the timer wakes when the first one
 * is due (at most every kTickMs), beating every agent that is due.
 * (Beating in 20 fixed slices of the interval instead sent a burst of 1/20 of the fleet at once
 * — 500 heartbeats every 250 ms at 10,000 agents — and the fleet's heartbeat latency measured
 * the server draining that burst: p50 ≈ half a burst, ≈ 10 ms.)
 */
import { performance } from 'node:perf_hooks';
import { SimAgent, type SimAgentTls } from './sim-agent.js';

type Args = Record<string, unknown>;

/**
 * Resolution of the heartbeat schedule (ms): the timer sleeps until the next agent is due, at
 * least this long (a heartbeat's stamp is taken when it leaves, so lateness is not latency).
 */
const kTickMs = 5;

let fleet: SimAgent[] = [];
/** Agents by due time (a queue over `dueAgents`/`dueAt` from `dueHead`). */
let dueAgents: SimAgent[] = [];
let dueAt: number[] = [];
let dueHead = 0;
let beat: NodeJS.Timeout | undefined;
let intervalMs = 0;
let sent = 0;
let blocked = 0;

/** Queues `agent` to beat at `atMs` (kept in order: never before the agent queued last). */
function schedule(agent: SimAgent, atMs: number): void {
  dueAgents.push(agent);
  dueAt.push(Math.max(atMs, dueAt[dueAt.length - 1] ?? 0));
  if (beat === undefined && intervalMs > 0) arm();
}

function arm(): void {
  const next = dueAt[dueHead];
  if (next === undefined) return;
  beat = setTimeout(beatDue, Math.max(kTickMs, next - performance.now()));
}

function beatDue(): void {
  beat = undefined;
  const now = performance.now();
  while (dueHead < dueAgents.length && (dueAt[dueHead] ?? Infinity) <= now) {
    const agent = dueAgents[dueHead]!;
    const at = dueAt[dueHead]!;
    dueHead++;
    sent++;
    // false: grpc-js buffers it (the connection's window is full); counted, never dropped
    if (!agent.heartbeat()) blocked++;
    // the agent's own timer: due again one interval after this beat was due
    dueAgents.push(agent);
    dueAt.push(Math.max(at + intervalMs, dueAt[dueAt.length - 1] ?? 0));
  }
  // drop the consumed prefix now and then (amortised O(1) per beat)
  if (dueHead > 4096 && dueHead * 2 > dueAgents.length) {
    dueAgents = dueAgents.slice(dueHead);
    dueAt = dueAt.slice(dueHead);
    dueHead = 0;
  }
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
  intervalMs = heartbeatMs;
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
        schedule(agent, now + heartbeatMs);
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
  intervalMs = 0;
  for (const agent of fleet) agent.close();
  fleet = [];
  dueAgents = [];
  dueAt = [];
  dueHead = 0;
  sent = 0;
  blocked = 0;
  return Promise.resolve(null);
}
