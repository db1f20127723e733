/**
 * What the main thread and a shard worker (shard.worker.ts) say to each other besides the two
 * data rings: the workerData they start with, the comlink control API the worker exposes, and
 * the events the worker posts on its events port.
 */
import type { MessagePort } from 'node:worker_threads';
import type { WireError } from '../../src/core/errors.js';
import type { RingHandle } from '../ring/ring-ends.js';

/** workerData of a shard worker. */
export interface ShardWorkerData {
  shardIndex: number;
  /** hrefs of the actor modules to import. */
  actorModules: string[];
  /** main → worker data frames: the worker's consumer end. */
  inbound: RingHandle;
  /** worker → main emitted frames: the worker's producer end. */
  outbound: RingHandle;
  /** Worker → main events (ShardEvent); transferred. */
  eventsPort: MessagePort;
}

/**
 * Control results cross the thread as values, never as thrown errors: comlink would reduce a
 * thrown error to its message and lose the code.
 */
export type ShardResult<T> = { ok: true; value: T } | { ok: false; error: WireError };

/** Counters a shard worker reports. */
export interface ShardWorkerStats {
  actors: number;
  delivered: number;
  undeliverable: number;
  actorErrors: number;
  badFrames: number;
}

/** The control API a shard worker exposes over comlink on its parentPort. */
export interface ShardApi {
  /** Resolves with the actor's incarnation number. */
  spawn(type: string, id: string, init: unknown): Promise<ShardResult<number>>;
  call(id: string, method: string, args: unknown): Promise<ShardResult<unknown>>;
  stopActor(id: string): Promise<ShardResult<null>>;
  stats(): ShardWorkerStats;
  /** Stops every actor (bounded by deadlineMs) and closes the outbound ring. */
  stop(deadlineMs: number): Promise<void>;
}

/** pino level names the worker forwards. */
export type LogLevel = 'info' | 'warn' | 'error';

/** Worker → main, on the events port. */
export type ShardEvent =
  | { t: 'ready' }
  | { t: 'log'; level: LogLevel; obj: object; msg: string | undefined }
  | { t: 'spawn'; type: string; id: string; init: unknown }
  | { t: 'stopped'; id: string; incarnation: number };
