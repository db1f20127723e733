/**
 * A shard in a worker thread, seen from the main thread: two rings (inbound data frames,
 * outbound emitted frames; SAB rings, or MessagePort rings with `ring: 'port'`), comlink for control calls, an events port for the worker's logs and
 * requests. A worker that dies (uncaught exception, process.exit, OOM) is replaced by a new
 * "generation" with fresh rings: its in-flight calls reject with actor.shard_restarted, frames it
 * had already published are still delivered, and its actors are reported lost.
 */
import { MessageChannel, Worker, type MessagePort, type Transferable } from 'node:worker_threads';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { wrap, type Remote } from 'comlink';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { SvcError } from '../../src/core/errors.js';
import { consumerHere, producerHere, type RingHandle, type RingKind } from '../ring/ring-ends.js';
import type { RingConsumer, RingProducer } from '../ring/types.js';
import { FrameEncoder, decodeFrame, frameHeaderBytes } from '../protocol/frames.js';
import type { ActorLogger } from './actor.js';
import { settledWithin } from './deadline.js';
import { guardedCall, unwrapResult, type CallOptions, type PendingCalls, type ShardBackend, type ShardStats } from './shard-backend.js';
import type { ShardApi, ShardEvent, ShardWorkerData, ShardWorkerStats } from './shard-protocol.js';
import { errorMessage } from '../../src/util/error-message.js';

const kShardWorkerUrl = new URL('./shard.worker.js', import.meta.url);
/**
 * Bound of one pump turn: the pump hands at most this many emitted frames, and stops after the
 * frame that reaches kDrainTurnBytes of payload, to onEmit before it yields to the event loop
 * (socket I/O). Whatever onEmit writes to a socket in one turn goes out with no chance for the
 * socket to drain, so a subscriber's byte bound (live-subscriber.ts) must be larger than a turn
 * plus one frame, or a reader that keeps up is counted as slow.
 */
const kDrainBatch = 1024;
const kDrainTurnBytes = 64 * 1024;
/** Restart backoff after a worker that died before becoming ready: base and cap (ms). */
const kRestartBackoffBaseMs = 100;
const kRestartBackoffMaxMs = 30_000;
/** How long the records a crashed worker posted on a port ring may take to arrive, ms. */
const kPortDrainGraceMs = 1_000;

export interface WorkerShardOptions {
  index: number;
  actorModules: readonly string[];
  ringBytes: number;
  ring: RingKind;
  logger: ActorLogger;
  onEmit: (kind: number, key: string, payload: Uint8Array) => void;
  onSpawnRequest: (type: string, id: string, init: unknown) => void;
  onRestart: (shardIndex: number, lostActorIds: string[]) => void;
}

/** One worker incarnation and its rings. */
interface Generation {
  readonly inbound: RingProducer;
  readonly outbound: RingConsumer;
  /** The worker's ends of the two rings, and what their handles need transferred. */
  readonly workerEnds: { inbound: RingHandle; outbound: RingHandle; transfer: Transferable[] };
  readonly pending: PendingCalls;
  readonly pumpAbort: AbortController;
  readonly ready: Promise<void>;
  markReady: () => void;
  failReady: (err: Error) => void;
  isReady: boolean;
  dead: boolean;
  worker: Worker | undefined;
  remote: Remote<ShardApi> | undefined;
  events: MessagePort | undefined;
  pumpDone: Promise<void>;
  lastError: unknown;
}

export class WorkerShard implements ShardBackend {
  readonly index: number;
  readonly #opts: WorkerShardOptions;
  readonly #logger: ActorLogger;
  readonly #encoder = new FrameEncoder();
  /** Actor id → incarnation, as confirmed by the worker. */
  readonly #actors = new Map<string, number>();
  #gen: Generation;
  #started = false;
  #restarts = 0;
  #startupFailures = 0;
  #emitErrors = 0;
  #stopping: Promise<void> | undefined;

  /** Starts the worker; rejects (after cleaning up) when it fails to come up. */
  static async start(opts: WorkerShardOptions): Promise<WorkerShard> {
    const shard = new WorkerShard(opts);
    try {
      await shard.#gen.ready;
    } catch (err) {
      await shard.stop(1000);
      throw err;
    }
    return shard;
  }

  private constructor(opts: WorkerShardOptions) {
    this.index = opts.index;
    this.#opts = opts;
    this.#logger = opts.logger;
    this.#gen = this.#newGeneration();
    this.#launch(this.#gen);
  }

  send(kind: number, id: string, payload: Uint8Array): boolean {
    if (this.#stopping !== undefined) throw new SvcError('server.not_ready', 'the actor system is stopping');
    // alignLast: an agent's message sits at an odd offset of grpc-js's buffer (after its 5-byte prefix).
    return this.#gen.inbound.tryWrite([this.#encoder.header(kind, 0, id), payload], true);
  }

  whenWritable(id: string, payloadBytes: number, signal?: AbortSignal): Promise<void> {
    // A crash closes this generation's ring, which resolves the wait; the retried send then
    // goes to the new generation.
    return this.#gen.inbound.waitWritable(frameHeaderBytes(id) + payloadBytes, signal);
  }

  spawn(type: string, id: string, init: unknown, opts: CallOptions): Promise<void> {
    return this.#control(`spawn ${type} ${id}`, opts, async (remote, gen) => {
      const incarnation = unwrapResult(await remote.spawn(type, id, init));
      if (this.#gen === gen) this.#actors.set(id, incarnation);
    });
  }

  call(id: string, method: string, args: unknown, opts: CallOptions): Promise<unknown> {
    return this.#control(`call ${id}.${method}`, opts, async (remote) => unwrapResult(await remote.call(id, method, args)));
  }

  stopActor(id: string, opts: CallOptions): Promise<void> {
    return this.#control(`stop ${id}`, opts, async (remote, gen) => {
      const result = await remote.stopActor(id);
      if (this.#gen === gen) this.#actors.delete(id);
      unwrapResult(result);
    });
  }

  counters(opts: CallOptions): Promise<ShardWorkerStats> {
    return this.#control('stats', opts, (remote) => remote.stats());
  }

  actorIds(): string[] {
    return [...this.#actors.keys()];
  }

  stats(): ShardStats {
    const gen = this.#gen;
    return {
      index: this.index,
      ready: gen.isReady && this.#stopping === undefined,
      actors: this.#actors.size,
      restarts: this.#restarts,
      inboundUsedBytes: gen.inbound.usedBytes,
      outboundUsedBytes: gen.outbound.usedBytes,
      emitErrors: this.#emitErrors,
    };
  }

  /** Stops the actors (bounded), delivers what they emitted, terminates the worker. Idempotent. */
  stop(deadlineMs: number): Promise<void> {
    this.#stopping ??= this.#stop(deadlineMs);
    return this.#stopping;
  }

  async #stop(deadlineMs: number): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    const left = (): number => Math.max(0, deadline - Date.now());
    const gen = this.#gen;
    gen.inbound.close();
    if (gen.isReady && !gen.dead && gen.remote !== undefined) {
      // Actors get half the budget; the rest is for draining their last frames.
      await settledWithin(gen.remote.stop(Math.floor(deadlineMs / 2)), left());
      await settledWithin(gen.pumpDone, left());
    }
    gen.pumpAbort.abort();
    this.#drainNow(gen);
    gen.failReady(new SvcError('server.not_ready', 'the actor system is stopping'));
    const err = new SvcError('server.not_ready', 'the actor system is stopping');
    for (const fail of [...gen.pending]) fail(err);
    // terminate() is prompt, but bound it too; at least a second so a slow machine finishes it.
    if (gen.worker !== undefined) await settledWithin(gen.worker.terminate(), Math.max(1000, left()));
    gen.events?.close();
  }

  #control<T>(what: string, opts: CallOptions, op: (remote: Remote<ShardApi>, gen: Generation) => Promise<T>): Promise<T> {
    if (this.#stopping !== undefined) return Promise.reject(new SvcError('server.not_ready', 'the actor system is stopping'));
    const gen = this.#gen;
    return guardedCall(gen.pending, what, opts, async () => {
      await gen.ready;
      return op(gen.remote!, gen);
    });
  }

  #newGeneration(): Generation {
    // The main thread wakes the worker once per event-loop turn, not once per frame: one socket read
    // of an agent's stream delivers many gRPC messages, each in its own callback (WakeMode, sab-ring.ts).
    const inbound = producerHere(this.#opts.ring, this.#opts.ringBytes, 'turn');
    const outbound = consumerHere(this.#opts.ring, this.#opts.ringBytes);
    let markReady!: () => void;
    let failReady!: (err: Error) => void;
    const ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    // Callers always attach their own handlers; this keeps an unobserved failure quiet.
    ready.catch(() => undefined);
    const gen: Generation = {
      inbound: inbound.producer,
      outbound: outbound.consumer,
      workerEnds: { inbound: inbound.remote, outbound: outbound.remote, transfer: [...inbound.transfer, ...outbound.transfer] },
      pending: new Set(),
      pumpAbort: new AbortController(),
      ready,
      markReady,
      failReady,
      isReady: false,
      dead: false,
      worker: undefined,
      remote: undefined,
      events: undefined,
      pumpDone: Promise.resolve(),
      lastError: undefined,
    };
    gen.pumpDone = this.#pump(gen);
    return gen;
  }

  #launch(gen: Generation): void {
    if (this.#stopping !== undefined) return;
    const { port1, port2 } = new MessageChannel();
    const workerData: ShardWorkerData = {
      shardIndex: this.index,
      actorModules: [...this.#opts.actorModules],
      inbound: gen.workerEnds.inbound,
      outbound: gen.workerEnds.outbound,
      eventsPort: port2,
    };
    const transferList = [port2, ...gen.workerEnds.transfer];
    const worker = new Worker(kShardWorkerUrl, { workerData, transferList, name: `actor-shard-${this.index}` });
    gen.worker = worker;
    gen.events = port1;
    gen.remote = wrap<ShardApi>(nodeEndpoint(worker));
    port1.on('message', (ev: ShardEvent) => this.#onEvent(gen, ev));
    worker.on('error', (err) => {
      gen.lastError = err;
    });
    worker.on('exit', (code) => this.#onExit(gen, code));
  }

  #onEvent(gen: Generation, ev: ShardEvent): void {
    switch (ev.t) {
      case 'ready':
        gen.isReady = true;
        this.#started = true;
        this.#startupFailures = 0;
        gen.markReady();
        break;
      case 'log':
        this.#logger[ev.level](ev.obj, ev.msg);
        break;
      case 'spawn':
        this.#opts.onSpawnRequest(ev.type, ev.id, ev.init);
        break;
      case 'stopped':
        if (gen === this.#gen && this.#actors.get(ev.id) === ev.incarnation) this.#actors.delete(ev.id);
        break;
    }
  }

  #onExit(gen: Generation, exitCode: number): void {
    if (gen.dead) return;
    gen.dead = true;
    gen.events?.close();
    if (this.#stopping !== undefined) return;
    const err = gen.lastError instanceof Error ? { message: gen.lastError.message, stack: gen.lastError.stack } : undefined;
    if (!this.#started) {
      gen.failReady(new Error(`actor shard ${this.index} failed to start (exit code ${exitCode}): ${err?.message ?? 'no error'}`));
      return;
    }
    // Frames the dead worker had published are complete (the head moves only after the bytes).
    // A SAB ring is never closed by a dead producer, so stop waiting on it; a port ring's
    // consumer sees the port close after the last record the worker posted, and the pump then
    // ends by itself (bounded, in case the close never comes).
    if (this.#opts.ring === 'sab') gen.pumpAbort.abort();
    else setTimeout(() => gen.pumpAbort.abort(), kPortDrainGraceMs).unref();
    this.#drainNow(gen);
    gen.inbound.close();
    const restarted = new SvcError('actor.shard_restarted', `actor shard ${this.index} crashed and was restarted`, {
      shardIndex: this.index,
    });
    gen.failReady(restarted);
    for (const fail of [...gen.pending]) fail(restarted);
    const lost = [...this.#actors.keys()];
    this.#actors.clear();
    this.#restarts++;
    if (!gen.isReady) this.#startupFailures++;
    const delayMs =
      this.#startupFailures === 0
        ? 0
        : Math.min(kRestartBackoffMaxMs, kRestartBackoffBaseMs * 2 ** (this.#startupFailures - 1)) * (0.5 + Math.random() / 2);
    this.#logger.error(
      { shard: this.index, exitCode, err, lostActors: lost.length, restarts: this.#restarts, restartDelayMs: Math.round(delayMs) },
      'actor shard worker died; restarting it',
    );
    const next = this.#newGeneration();
    this.#gen = next;
    if (delayMs === 0) this.#launch(next);
    else setTimeout(() => this.#launch(next), delayMs).unref();
    try {
      this.#opts.onRestart(this.index, lost);
    } catch (cbErr) {
      this.#logger.error({ shard: this.index, err: String(cbErr) }, 'onShardRestart threw');
    }
  }

  async #pump(gen: Generation): Promise<void> {
    const { outbound, pumpAbort } = gen;
    let turnBytes = 0;
    const onRecord = (record: Uint8Array): void => {
      turnBytes += record.byteLength;
      this.#onRecord(record);
    };
    try {
      while (await outbound.waitReadable(pumpAbort.signal)) {
        turnBytes = 0;
        for (let n = 0; n < kDrainBatch && turnBytes < kDrainTurnBytes; n++) if (outbound.drain(onRecord, 1) === 0) break;
        // Back to the event loop after every turn, also when the ring is empty now: waitReadable
        // resolves at once (a microtask) when the worker wrote meanwhile, so a pump that only
        // yielded after a full batch kept draining, megabytes on a busy machine, while no socket
        // was serviced, and every SSE subscriber, fast readers too, was cut off as slow.
        await yieldToLoop();
      }
    } catch (err) {
      if (!pumpAbort.signal.aborted) this.#logger.error({ shard: this.index, err: String(err) }, 'outbound pump failed');
    }
  }

  #drainNow(gen: Generation): void {
    while (gen.outbound.drain(this.#onRecord) > 0);
  }

  readonly #onRecord = (record: Uint8Array): void => {
    let frame;
    try {
      frame = decodeFrame(record);
    } catch (err) {
      this.#emitErrors++;
      this.#logger.error({ shard: this.index, err: String(err) }, 'bad outbound frame');
      return;
    }
    try {
      this.#opts.onEmit(frame.kind, frame.key, frame.payload);
    } catch (err) {
      this.#emitErrors++;
      this.#logger.error({ shard: this.index, key: frame.key, err: errorMessage(err) }, 'onEmit threw');
    }
  };
}
