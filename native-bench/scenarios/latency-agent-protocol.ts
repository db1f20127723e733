/**
 * What the `latency` scenario's agent thread (latency-agent.worker.ts) and its subscribers' thread
 * (latency-client.ts) share: the layout of the shared memory, the messages, the cross-thread clock.
 */
import { performance } from 'node:perf_hooks';
import type { SimAgentTls } from './sim-agent.js';

export const kMinSeq = 0;
export const kFirstMeasured = 1;
/** Clock check: the round (odd: the subscribers' thread stamped `clock[0]`; even: the agent answered in `clock[1]`). */
export const kClockRound = 2;
export const kClockRounds = 200;
/** Ticks of the pacing clock (latency-ticker.worker.ts): the paced phase sends on each. */
export const kTick = 3;
/** The max-rate phase's window: chunks sent and not yet parsed by every subscriber. */
export const kWindow = 32;
/** At most this many chunks per wake-up of the paced phase (catching up after a late wake-up). */
export const kBurstLimit = 2;

export interface AgentShared {
  sendAt: SharedArrayBuffer;
  ctl: SharedArrayBuffer;
  clock: SharedArrayBuffer;
}

export interface AgentWorkerData extends AgentShared {
  target: string;
  tls: SimAgentTls;
  agentId: string;
  instanceId: string;
  commandId: string;
  chunkBytes: number;
}

/** Agent thread → pacing thread (latency-ticker.worker.ts). */
export type ToTicker = { op: 'run'; t0: number; intervalMs: number; untilMs: number } | { op: 'close' };

export type ToAgent = { op: 'max'; ms: number } | { op: 'paced'; rate: number; warmupMs: number; measureMs: number } | { op: 'close' };

/** How evenly the paced phase sent: chunks per wake-up, and how late a chunk left after its due time. */
export interface Pacing {
  wakeUps: number;
  maxBurst: number;
  p99Burst: number;
  /** Wake-ups that sent more than one chunk. */
  multiBursts: number;
  lateP50Ms: number;
  lateP99Ms: number;
  lateMaxMs: number;
}

export type FromAgent =
  | { event: 'ready' }
  | { event: 'registered' }
  | { event: 'measuring' }
  | { event: 'max'; maxRate: number; seq: number }
  | { event: 'paced'; last: number; pacing: Pacing }
  | { event: 'error'; message: string };

/** Milliseconds on a clock both threads of the client process read alike (the clock check measures how alike). */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}
