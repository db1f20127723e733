/**
 * ActorSystem: the main thread's entry to the actor runtime (DESIGN.md "Threads and the data
 * path"). A fixed number of shards; actor `id` lives in shard fnv1a32(placementKey(id)) % shards
 * (shard-hash.ts). In mode 'workers' each shard is a worker thread fed by an inbound ring (send)
 * and drained through an outbound ring (onEmit), with control calls over comlink; the rings are
 * SAB rings, or MessagePort rings with `ring: 'port'` (the fallback, DESIGN.md). In mode 'inline'
 * the same ActorHost runs on the main thread with direct calls (the benchmark baseline).
 *
 * Placement: an actor module may list types in `mainThreadActorTypes`; in workers mode their
 * actors live in one more InlineShard on the main thread instead of a worker shard (calls, frames
 * and stops for such an id go there while it lives). That is for actors whose every step is
 * main-thread work anyway: in a worker they would gain nothing and pay a crossing, and a thread
 * wake-up, each way per step (the VM operation queues, actors/vm/vm-ops.actor.ts).
 *
 * Backpressure, end to end: send() returns false when the shard's inbound ring is full — keep
 * the frame and retry after `await whenWritable(id, payload.byteLength)`; an actor whose
 * ctx.emit returns false does the same with ctx.whenWritable. Nothing is dropped silently:
 * frames for unknown actors are counted and logged (counters()), and frames an actor emitted
 * before its worker crashed are still delivered.
 */
import { SvcError } from '../../src/core/errors.js';
import { validateCapacityBytes } from '../ring/layout.js';
import type { RingKind } from '../ring/ring-ends.js';
import type { ActorLogger } from './actor.js';
import { loadActorTypes, loadMainThreadTypes } from './actor-registry.js';
import { InlineShard } from './inline-shard.js';
import { kDefaultCallTimeoutMs, type CallOptions, type ShardBackend, type ShardStats } from './shard-backend.js';
import { shardIndexOf } from './shard-hash.js';
import type { ShardWorkerStats } from './shard-protocol.js';
import { WorkerShard } from './worker-shard.js';
import { errorMessage } from '../../src/util/error-message.js';

export type { CallOptions, ShardStats } from './shard-backend.js';
export type { ShardWorkerStats } from './shard-protocol.js';
export type { RingKind } from '../ring/ring-ends.js';

/** Default bytes of each shard ring (inbound and outbound each). */
export const kDefaultRingBytes = 4 * 1024 * 1024;
/** Default bound of stop() (ms). */
export const kDefaultStopDeadlineMs = 5_000;

export type ActorMode = 'workers' | 'inline';

export interface ActorSystemOptions {
  /** 'workers': one worker thread per shard; 'inline': everything on the main thread. */
  mode: ActorMode;
  /** Number of shards (≥ 1). DESIGN.md's default is cores − 1, at least 1; the caller decides. */
  shards: number;
  /** Modules exporting `actorTypes`; every shard imports all of them. */
  actorModules: readonly URL[];
  /** Bytes of each inbound and each outbound ring, a power of two. Default kDefaultRingBytes (4 MiB). */
  ringBytes?: number;
  /** Workers mode: 'sab' (SharedArrayBuffer rings, the default) or 'port' (MessagePort rings). */
  ring?: RingKind;
  /**
   * Receives every emitted frame, in emission order per actor. The payload view is valid only
   * during the call (it points into the ring): copy what you keep. In inline mode it may run
   * inside send(). Exceptions are logged and counted (stats().perShard[i].emitErrors).
   */
  onEmit: (kind: number, key: string, payload: Uint8Array) => void;
  /** pino-compatible logger; default: silent. Worker log lines are forwarded to it. */
  logger?: ActorLogger;
  /** A shard's worker died and was restarted; its actors (ids listed) are gone. */
  onShardRestart?: (shardIndex: number, lostActorIds: string[]) => void;
}

export interface ActorSystemStats {
  mode: ActorMode;
  shards: number;
  /** Live actors, as the main thread knows them. */
  actors: number;
  /** Worker restarts since start, all shards. */
  restarts: number;
  perShard: ShardStats[];
}

const silentLogger: ActorLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

function notReady(): SvcError {
  return new SvcError('server.not_ready', 'the actor system is stopping');
}

export class ActorSystem {
  readonly mode: ActorMode;
  readonly #shards: ShardBackend[];
  readonly #logger: ActorLogger;
  /** Workers mode: the main thread's shard of the mainThreadActorTypes (see Placement). */
  readonly #main: InlineShard | undefined;
  #stopping: Promise<void> | undefined;

  /**
   * Starts all shards (workers: waits until each has imported the actor modules). Rejects with
   * RangeError for bad options, or with the startup error of a shard (then nothing is left running).
   */
  static async start(opts: ActorSystemOptions): Promise<ActorSystem> {
    if (!Number.isInteger(opts.shards) || opts.shards < 1) throw new RangeError(`shards must be an integer ≥ 1, got ${opts.shards}`);
    const ringBytes = opts.ringBytes ?? kDefaultRingBytes;
    validateCapacityBytes(ringBytes);
    const ring = opts.ring ?? 'sab';
    if (ring !== 'sab' && ring !== 'port') throw new RangeError(`ring must be 'sab' or 'port', got ${String(ring)}`);
    const logger = opts.logger ?? silentLogger;
    const modules = opts.actorModules.map((u) => u.href);
    // The system is referenced lazily by the spawn route (actors spawning actors).
    const ref: { system?: ActorSystem } = {};
    const onSpawnRequest = (type: string, id: string, init: unknown): void => {
      if (ref.system === undefined) return;
      ref.system.spawn(type, id, init).catch((err: unknown) => {
        logger.warn({ actorType: type, actor: id, err: errorMessage(err) }, 'spawn requested by an actor failed');
      });
    };
    const indexes = Array.from({ length: opts.shards }, (_, i) => i);
    let shards: ShardBackend[];
    let main: InlineShard | undefined;
    if (opts.mode === 'inline') {
      const types = await loadActorTypes(modules);
      shards = indexes.map((index) => new InlineShard({ index, types, ringBytes, logger, onEmit: opts.onEmit, onSpawnRequest }));
    } else if (opts.mode === 'workers') {
      const onRestart = opts.onShardRestart ?? (() => undefined);
      const started = await Promise.allSettled(
        indexes.map((index) =>
          WorkerShard.start({ index, actorModules: modules, ringBytes, ring, logger, onEmit: opts.onEmit, onSpawnRequest, onRestart }),
        ),
      );
      const ok = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      const failed = started.find((r) => r.status === 'rejected');
      if (failed !== undefined) {
        await Promise.all(ok.map((s) => s.stop(kDefaultStopDeadlineMs)));
        throw failed.reason;
      }
      shards = ok;
      const mainTypes = await loadMainThreadTypes(modules).catch(async (err: unknown) => {
        await Promise.all(ok.map((sh) => sh.stop(kDefaultStopDeadlineMs)));
        throw err;
      });
      if (mainTypes.size > 0) {
        const all = await loadActorTypes(modules);
        const types = new Map([...all].filter(([name]) => mainTypes.has(name)));
        main = new InlineShard({ index: -1, types, ringBytes, logger, onEmit: opts.onEmit, onSpawnRequest });
      }
    } else {
      throw new RangeError(`mode must be 'workers' or 'inline', got ${String(opts.mode)}`);
    }
    ref.system = new ActorSystem(opts.mode, shards, logger, main);
    return ref.system;
  }

  private constructor(mode: ActorMode, shards: ShardBackend[], logger: ActorLogger, main: InlineShard | undefined) {
    this.mode = mode;
    this.#shards = shards;
    this.#logger = logger;
    this.#main = main;
  }

  /** Number of shards. */
  get shards(): number {
    return this.#shards.length;
  }

  /** Shard index of actor `id` (stable: FNV-1a of the UTF-8 id, mod shards). */
  shardOf(id: string): number {
    return shardIndexOf(id, this.#shards.length);
  }

  /**
   * Creates actor `id` of `type` with `init` (structured-cloned in workers mode). Rejects
   * SvcError actor.already_exists when the id is taken, request.invalid for an unknown type,
   * actor.shard_restarted when the shard crashed meanwhile, server.timeout, server.not_ready.
   */
  spawn(type: string, id: string, init?: unknown, opts: CallOptions = {}): Promise<void> {
    if (this.#stopping !== undefined) return Promise.reject(notReady());
    if (this.#main?.types.has(type) === true) {
      // One id, one actor: not while a worker shard has it.
      if (this.#shardFor(id).actorIds().includes(id)) {
        return Promise.reject(new SvcError('actor.already_exists', `actor ${id} already exists`, { id }));
      }
      return this.#main.spawn(type, id, init, opts);
    }
    if (this.#main?.has(id) === true) return Promise.reject(new SvcError('actor.already_exists', `actor ${id} already exists`, { id }));
    return this.#shardFor(id).spawn(type, id, init, opts);
  }

  /**
   * Data plane: one frame of `kind` (1..255) with `payload` for actor `id`. Copies the payload
   * before returning. Returns false — and sends nothing — when the shard's inbound ring is full:
   * keep the frame and retry after whenWritable. Throws RangeError for a frame larger than a
   * ring accepts (ringBytes − 4 − frame header), SvcError server.not_ready after stop().
   * Frames for one actor arrive in send order.
   */
  send(id: string, kind: number, payload: Uint8Array): boolean {
    if (this.#stopping !== undefined) throw notReady();
    return this.#route(id).send(kind, id, payload);
  }

  /** Resolves once a frame for `id` with `payloadBytes` of payload would fit (or the system stops). */
  whenWritable(id: string, payloadBytes: number, signal?: AbortSignal): Promise<void> {
    if (this.#stopping !== undefined) return Promise.resolve();
    return this.#route(id).whenWritable(id, payloadBytes, signal);
  }

  /**
   * Calls `method` on actor `id` with `args` (structured-cloned). Rejects with the actor's
   * SvcError (code kept across the thread), actor.not_found, actor.shard_restarted,
   * server.timeout after opts.timeoutMs (default 30 s), or the signal's reason.
   */
  call<T = unknown>(id: string, method: string, args?: unknown, opts: CallOptions = {}): Promise<T> {
    if (this.#stopping !== undefined) return Promise.reject(notReady());
    return this.#route(id).call(id, method, args, opts) as Promise<T>;
  }

  /** Stops actor `id` (its stop handler runs). Rejects actor.not_found for an unknown id. */
  stopActor(id: string, opts: CallOptions = {}): Promise<void> {
    if (this.#stopping !== undefined) return Promise.reject(notReady());
    return this.#route(id).stopActor(id, opts);
  }

  /** Main-thread numbers, synchronously (no call into the workers). */
  stats(): ActorSystemStats {
    const perShard = this.#shards.map((s) => s.stats());
    return {
      mode: this.mode,
      shards: this.#shards.length,
      actors: perShard.reduce((n, s) => n + s.actors, 0) + (this.#main?.stats().actors ?? 0),
      restarts: perShard.reduce((n, s) => n + s.restarts, 0),
      perShard,
    };
  }

  /** Each shard's host counters (frames delivered, undeliverable, actor errors, bad frames). */
  counters(opts: CallOptions = {}): Promise<ShardWorkerStats[]> {
    if (this.#stopping !== undefined) return Promise.reject(notReady());
    return Promise.all(this.#shards.map((s) => s.counters({ timeoutMs: opts.timeoutMs ?? kDefaultCallTimeoutMs, ...opts })));
  }

  /** Ids of the actors the main thread knows in shard `shardIndex`. */
  actorIds(shardIndex: number): string[] {
    return this.#shards[shardIndex]?.actorIds() ?? [];
  }

  /**
   * Stops every actor, delivers the frames they emitted, and ends the workers, within
   * opts.deadlineMs (default 5 s; workers are terminated when it passes). Idempotent: later
   * calls return the same promise. Calls still in flight reject with server.not_ready.
   */
  stop(opts: { deadlineMs?: number } = {}): Promise<void> {
    this.#stopping ??= (async () => {
      const deadlineMs = opts.deadlineMs ?? kDefaultStopDeadlineMs;
      await Promise.all([...this.#shards, ...(this.#main === undefined ? [] : [this.#main])].map((s) => s.stop(deadlineMs)));
      this.#logger.info({ mode: this.mode, shards: this.#shards.length }, 'actor system stopped');
    })();
    return this.#stopping;
  }

  /** Where actor `id` lives: the main thread's shard while it has the id, else its worker shard. */
  #route(id: string): ShardBackend {
    return this.#main?.has(id) === true ? this.#main : this.#shardFor(id);
  }

  #shardFor(id: string): ShardBackend {
    return this.#shards[shardIndexOf(id, this.#shards.length)]!;
  }
}
