/**
 * The main thread's view of one shard, implemented by WorkerShard (a worker thread behind two
 * SAB rings and comlink) and InlineShard (an ActorHost on the main thread), plus the guarded-call
 * helper both use so timeouts, aborts and shard crashes settle every control call exactly once.
 */
import { SvcError, fromWire } from '../../src/core/errors.js';
import type { ShardResult, ShardWorkerStats } from './shard-protocol.js';

/** Options of a control call. */
export interface CallOptions {
  /** Reject with SvcError server.timeout after this long. Default kDefaultCallTimeoutMs. */
  timeoutMs?: number;
  /** Reject with the signal's reason when it aborts. */
  signal?: AbortSignal;
}

/** Default bound of a control call (ms). */
export const kDefaultCallTimeoutMs = 30_000;

/** Per-shard numbers for ActorSystem.stats(). */
export interface ShardStats {
  index: number;
  /** The shard can take control calls (its worker has started). */
  ready: boolean;
  actors: number;
  /** Times this shard's worker crashed and was restarted. */
  restarts: number;
  /** Bytes queued main → shard, including per-record overhead (0 inline). */
  inboundUsedBytes: number;
  /** Bytes queued shard → main, including per-record overhead (0 inline). */
  outboundUsedBytes: number;
  /** Emitted frames that failed to decode or whose onEmit threw (logged). */
  emitErrors: number;
}

export interface ShardBackend {
  readonly index: number;
  send(kind: number, id: string, payload: Uint8Array): boolean;
  whenWritable(id: string, payloadBytes: number, signal?: AbortSignal): Promise<void>;
  spawn(type: string, id: string, init: unknown, opts: CallOptions): Promise<void>;
  call(id: string, method: string, args: unknown, opts: CallOptions): Promise<unknown>;
  stopActor(id: string, opts: CallOptions): Promise<void>;
  /** Ids of the actors the main thread believes live here. */
  actorIds(): string[];
  stats(): ShardStats;
  /** The host's counters (from the worker in workers mode; rejects like a control call). */
  counters(opts: CallOptions): Promise<ShardWorkerStats>;
  stop(deadlineMs: number): Promise<void>;
}

/** A set of fail callbacks of the calls in flight, so a crash or stop can reject them all. */
export type PendingCalls = Set<(err: Error) => void>;

/**
 * Runs `op` bounded by opts.timeoutMs and opts.signal, registered in `pending` until it settles.
 * Whichever comes first — result, timeout, abort, or a fail() from the owner — settles the promise.
 */
export function guardedCall<T>(pending: PendingCalls, what: string, opts: CallOptions, op: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const { signal } = opts;
    if (signal?.aborted === true) {
      reject(signal.reason as Error);
      return;
    }
    const timeoutMs = opts.timeoutMs ?? kDefaultCallTimeoutMs;
    let done = false;
    const settle = (): boolean => {
      if (done) return false;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      pending.delete(fail);
      return true;
    };
    const fail = (err: Error): void => {
      if (settle()) reject(err);
    };
    const onAbort = (): void => fail(signal?.reason as Error);
    const timer = setTimeout(() => {
      fail(new SvcError('server.timeout', `${what} did not finish within ${timeoutMs} ms`, { timeoutMs }));
    }, timeoutMs);
    timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
    pending.add(fail);
    op().then(
      (value) => {
        if (settle()) resolve(value);
      },
      (err: unknown) => fail(err instanceof Error ? err : new SvcError('server.internal', String(err))),
    );
  });
}

/** The value of a ShardResult, or its error rethrown as SvcError. */
export function unwrapResult<T>(result: ShardResult<T>): T {
  if (result.ok) return result.value;
  throw fromWire(result.error);
}
