/**
 * Entry of one actor shard worker (loaded by URL from actor-system, never imported). It imports
 * the actor modules, runs an ActorHost fed from the inbound ring, writes emitted frames into the
 * outbound ring (SAB rings, or MessagePort rings with `ring: 'port'`), exposes ShardApi over
 * comlink on parentPort, and posts ShardEvent messages (ready, logs, spawn requests, self-stops)
 * on its events port.
 *
 * Blocking is allowed in a worker, but nothing here blocks: the rings are awaited with
 * waitReadable/waitWritable so comlink control calls interleave with the data path.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { expose } from 'comlink';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { SvcError, toWire } from '../../src/core/errors.js';
import { openConsumer, openProducer } from '../ring/ring-ends.js';
import { FrameDecodeError, FrameEncoder, decodeFrame, frameHeaderBytes } from '../protocol/frames.js';
import type { ActorLogger } from './actor.js';
import { loadActorTypes } from './actor-registry.js';
import { ActorHost } from './actor-host.js';
import { outboxBytesQueuedInThread } from './outbox.js';
import type { LogLevel, ShardApi, ShardEvent, ShardResult, ShardWorkerData, ShardWorkerStats } from './shard-protocol.js';

/** Records handled per drain before yielding to the event loop (lets control calls in). */
const kDrainBatch = 1024;
/** Records per drain call: between two, a full outbound ring stops the pump (backpressure below). */
const kDrainStep = 32;

const data = workerData as ShardWorkerData;
const events = data.eventsPort;
const post = (ev: ShardEvent): void => events.postMessage(ev);

function forward(level: LogLevel): (obj: object, msg?: string) => void {
  return (obj, msg) => {
    try {
      post({ t: 'log', level, obj, msg });
    } catch {
      // An uncloneable field: keep the message, drop the object.
      post({ t: 'log', level, obj: { shard: data.shardIndex, note: 'log fields were not cloneable' }, msg });
    }
  };
}
const logger: ActorLogger = { info: forward('info'), warn: forward('warn'), error: forward('error') };

const types = await loadActorTypes(data.actorModules);
const inbound = openConsumer(data.inbound);
// The worker wakes the main thread once per synchronous run (a drain of up to kDrainBatch records
// emits many frames), not once per frame (WakeMode, sab-ring.ts).
const outbound = openProducer(data.outbound, 'microtask');
const encoder = new FrameEncoder();
let badFrames = 0;
/**
 * Backpressure: set when an emit found the outbound ring full. The pump then stops reading the
 * inbound ring until the outbound has room again and the actors' outboxes are empty, so an
 * actor never queues without bound what the main thread cannot take yet (Outbox): the inbound
 * ring fills instead, the main thread's ActorLane reports it, and the source (an agent's gRPC
 * stream, agent-streams.ts) is paused — flow control reaches the agent.
 */
let outboundFull = false;

const host = new ActorHost({
  shardIndex: data.shardIndex,
  types,
  logger,
  io: {
    emit: (kind, key, payload) => {
      if (outbound.tryWrite([encoder.header(kind, 0, key), payload])) return true;
      outboundFull = true;
      return false;
    },
    whenWritable: (key, payloadBytes) => outbound.waitWritable(frameHeaderBytes(key) + payloadBytes),
    spawn: (type, id, init) => post({ t: 'spawn', type, id, init }),
    stopped: (id, incarnation) => post({ t: 'stopped', id, incarnation }),
  },
});

function failure(err: unknown, what: string): { ok: false; error: ReturnType<typeof toWire> } {
  if (!(err instanceof SvcError)) {
    // toWire hides the message of unexpected errors from callers; the log keeps it.
    const e = err instanceof Error ? { message: err.message, stack: err.stack } : { value: String(err) };
    logger.error({ shard: data.shardIndex, err: e }, `${what} failed`);
  }
  return { ok: false, error: toWire(err) };
}

const api: ShardApi = {
  spawn(type, id, init): Promise<ShardResult<number>> {
    try {
      return Promise.resolve({ ok: true, value: host.spawn(type, id, init) });
    } catch (err) {
      return Promise.resolve(failure(err, `spawn ${type} ${id}`));
    }
  },
  async call(id, method, args): Promise<ShardResult<unknown>> {
    try {
      return { ok: true, value: await host.call(id, method, args) };
    } catch (err) {
      return failure(err, `call ${id}.${method}`);
    }
  },
  async stopActor(id): Promise<ShardResult<null>> {
    try {
      await host.stopActor(id);
      return { ok: true, value: null };
    } catch (err) {
      return failure(err, `stop ${id}`);
    }
  },
  stats(): ShardWorkerStats {
    return { actors: host.size, ...host.counters, badFrames };
  },
  async stop(deadlineMs): Promise<void> {
    await host.stopAll(deadlineMs);
    outbound.close();
  },
};

function onRecord(record: Uint8Array): void {
  let frame;
  try {
    frame = decodeFrame(record);
  } catch (err) {
    badFrames++;
    logger.error({ shard: data.shardIndex, reason: err instanceof FrameDecodeError ? err.reason : 'unknown' }, 'bad inbound frame');
    return;
  }
  host.deliver(frame.kind, frame.key, frame.payload);
}

async function pumpInbound(): Promise<void> {
  // Ends when the main thread closes the inbound ring (system stop).
  const resumeBytes = Math.min(outbound.maxRecordBytes, outbound.capacityBytes >> 1);
  while (await inbound.waitReadable()) {
    while (outboundFull || outboxBytesQueuedInThread() > 0) {
      outboundFull = false;
      await outbound.waitWritable(resumeBytes);
      // The outboxes' flushes (promise continuations) run first; one that fills the ring again sets the flag.
      await yieldToLoop();
    }
    let handled = 0;
    let n: number;
    do {
      n = inbound.drain(onRecord, kDrainStep);
      handled += n;
    } while (n === kDrainStep && !outboundFull && handled < kDrainBatch);
    if (handled >= kDrainBatch) await yieldToLoop();
  }
}

if (parentPort === null) throw new Error('shard.worker must run in a worker thread');
expose(api, nodeEndpoint(parentPort));
post({ t: 'ready' });
pumpInbound().catch((err: unknown) => {
  // Not expected; crash the worker so the main thread restarts it rather than leave it deaf.
  setImmediate(() => {
    throw err;
  });
});
