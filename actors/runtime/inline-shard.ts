/**
 * A shard on the main thread (mode 'inline'): the same ActorHost as a worker shard, driven by
 * direct calls with no worker and no ring. It is the baseline of every benchmark and a debugging
 * aid. Differences a caller may notice: send() delivers synchronously (the actor's receive, and
 * any onEmit it causes, run inside send), and emit never reports a full ring.
 */
import { SvcError, fromWire, toWire } from '../../src/core/errors.js';
import { maxRecordBytesFor } from '../ring/layout.js';
import { FrameEncoder } from '../protocol/frames.js';
import type { ActorLogger } from './actor.js';
import type { ActorTypes } from './actor-registry.js';
import { ActorHost } from './actor-host.js';
import type { ShardWorkerStats } from './shard-protocol.js';
import { guardedCall, type CallOptions, type PendingCalls, type ShardBackend, type ShardStats } from './shard-backend.js';
import { errorMessage } from '../../src/util/error-message.js';

export interface InlineShardOptions {
  index: number;
  types: ActorTypes;
  /** Frames larger than a ring of this size would accept are refused here too (RangeError). */
  ringBytes: number;
  logger: ActorLogger;
  onEmit: (kind: number, key: string, payload: Uint8Array) => void;
  onSpawnRequest: (type: string, id: string, init: unknown) => void;
}

export class InlineShard implements ShardBackend {
  readonly index: number;
  /** The actor types this shard hosts. */
  readonly types: ActorTypes;
  readonly #host: ActorHost;
  readonly #pending: PendingCalls = new Set();
  readonly #encoder = new FrameEncoder();
  readonly #maxFrameBytes: number;
  readonly #logger: ActorLogger;
  #emitErrors = 0;
  #stopping: Promise<void> | undefined;

  constructor(opts: InlineShardOptions) {
    this.index = opts.index;
    this.types = opts.types;
    this.#maxFrameBytes = maxRecordBytesFor(opts.ringBytes);
    const { logger, onEmit } = opts;
    this.#logger = logger;
    this.#host = new ActorHost({
      shardIndex: opts.index,
      types: opts.types,
      logger,
      io: {
        emit: (kind, key, payload) => {
          this.#checkFrame(kind, key, payload);
          try {
            onEmit(kind, key, payload);
          } catch (err) {
            this.#emitErrors++;
            logger.error({ shard: opts.index, key, err: errorMessage(err) }, 'onEmit threw');
          }
          return true;
        },
        whenWritable: () => Promise.resolve(),
        spawn: opts.onSpawnRequest,
        stopped: () => undefined,
      },
    });
  }

  send(kind: number, id: string, payload: Uint8Array): boolean {
    if (this.#stopping !== undefined) throw new SvcError('server.not_ready', 'the actor system is stopping');
    this.#checkFrame(kind, id, payload);
    this.#host.deliver(kind, id, payload);
    return true;
  }

  whenWritable(): Promise<void> {
    return Promise.resolve();
  }

  spawn(type: string, id: string, init: unknown, opts: CallOptions): Promise<void> {
    // A throw inside the executor rejects the promise (SvcError from the host, or the factory's error).
    const what = `spawn ${type} ${id}`;
    return guardedCall(this.#pending, what, opts, () =>
      new Promise<void>((resolve) => {
        if (this.#stopping !== undefined) throw new SvcError('server.not_ready', 'the actor system is stopping');
        this.#host.spawn(type, id, init);
        resolve();
      }).catch((err: unknown) => this.#asWorkerWould(err, what)),
    );
  }

  call(id: string, method: string, args: unknown, opts: CallOptions): Promise<unknown> {
    const what = `call ${id}.${method}`;
    return guardedCall(this.#pending, what, opts, () =>
      this.#host.call(id, method, args).catch((err: unknown) => this.#asWorkerWould(err, what)),
    );
  }

  stopActor(id: string, opts: CallOptions): Promise<void> {
    return guardedCall(this.#pending, `stop ${id}`, opts, () => this.#host.stopActor(id));
  }

  actorIds(): string[] {
    return this.#host.ids();
  }

  /** True while actor `id` lives in this shard. */
  has(id: string): boolean {
    return this.#host.has(id);
  }

  stats(): ShardStats {
    return {
      index: this.index,
      ready: this.#stopping === undefined,
      actors: this.#host.size,
      restarts: 0,
      inboundUsedBytes: 0,
      outboundUsedBytes: 0,
      emitErrors: this.#emitErrors,
    };
  }

  counters(): Promise<ShardWorkerStats> {
    return Promise.resolve({ actors: this.#host.size, ...this.#host.counters, badFrames: 0 });
  }

  stop(deadlineMs: number): Promise<void> {
    this.#stopping ??= (async () => {
      await this.#host.stopAll(deadlineMs);
      const err = new SvcError('server.not_ready', 'the actor system is stopping');
      for (const fail of [...this.#pending]) fail(err);
    })();
    return this.#stopping;
  }

  /**
   * Rethrows `err` as it would arrive from a worker: SvcErrors unchanged, anything else logged
   * and replaced by server.internal, so callers cannot tell the modes apart by their errors.
   */
  #asWorkerWould(err: unknown, what: string): never {
    if (!(err instanceof SvcError)) {
      const e = err instanceof Error ? { message: err.message, stack: err.stack } : { value: String(err) };
      this.#logger.error({ shard: this.index, err: e }, `${what} failed`);
    }
    throw fromWire(toWire(err));
  }

  /** The same limits a worker shard's ring and frame encoder impose, so both modes refuse alike. */
  #checkFrame(kind: number, key: string, payload: Uint8Array): void {
    const header = this.#encoder.header(kind, 0, key);
    if (header.byteLength + payload.byteLength > this.#maxFrameBytes) {
      throw new RangeError(`frame of ${header.byteLength + payload.byteLength} bytes exceeds maxRecordBytes ${this.#maxFrameBytes}`);
    }
  }
}
