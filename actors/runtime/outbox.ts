/**
 * Ordered emission from an actor with the runtime's backpressure rule: when ctx.emit reports a
 * full outbound ring, the frame (copied) and everything after it wait in a queue, flushed in
 * order after ctx.whenWritable. Nothing is dropped, and no frame overtakes an earlier one,
 * whatever its kind. ActorLane (actor-lane.ts) is the same rule on the main thread's side.
 */
import type { ActorContext } from './actor.js';
import { errorMessage } from '../../src/util/error-message.js';

interface Pending {
  readonly kind: number;
  readonly key: string;
  readonly payload: Uint8Array;
}

/** Bytes queued in every Outbox of this thread (a worker shard stops its inbound pump while > 0). */
let threadQueuedBytes = 0;

/** Bytes waiting in the outboxes of this thread's actors. */
export function outboxBytesQueuedInThread(): number {
  return threadQueuedBytes;
}

export class Outbox {
  readonly #ctx: ActorContext;
  readonly #queue: Pending[] = [];
  #queuedBytes = 0;
  /**
   * True while a #flush runs. Set before #flush is called and cleared by #flush itself: #flush
   * can finish synchronously (the other thread freed room between emit's failed try and the
   * flush's first retry), and a `#flushing ??= #flush()` would then store the already-settled
   * promise after #flush had cleared it, so later frames queued with no flush to write them.
   */
  #flushRunning = false;
  #flushing: Promise<void> = Promise.resolve();
  #closed = false;
  #dropped = 0;

  constructor(ctx: ActorContext) {
    this.#ctx = ctx;
  }

  /** Bytes waiting for room in the outbound ring. */
  get queuedBytes(): number {
    return this.#queuedBytes;
  }

  /** Frames refused by the runtime (larger than a ring record) and frames left behind by close(). */
  get dropped(): number {
    return this.#dropped;
  }

  /**
   * Emits now, or queues behind earlier frames. `owned`: the payload is a fresh buffer nobody
   * else touches, so a queued frame need not be copied.
   */
  emit(kind: number, key: string, payload: Uint8Array, owned = false): void {
    if (this.#closed) return;
    if (this.#queue.length === 0 && this.#tryEmit(kind, key, payload)) return;
    // A copy, not payload.slice(): on a Buffer (an actor's scratch, command-replay.ts) slice is a
    // view, and every queued frame then showed whatever the scratch held when it was flushed.
    this.#queue.push({ kind, key, payload: owned ? payload : new Uint8Array(payload) });
    this.#queuedBytes += payload.byteLength;
    threadQueuedBytes += payload.byteLength;
    if (!this.#flushRunning) {
      this.#flushRunning = true;
      this.#flushing = this.#flush();
    }
  }

  /** Resolves once the queue is empty (at once when it is). */
  idle(): Promise<void> {
    return this.#flushRunning ? this.#flushing : Promise.resolve();
  }

  /** Drops what is queued; later emits are ignored (the actor is stopping). */
  close(): void {
    this.#closed = true;
    this.#dropped += this.#queue.length;
    this.#queue.length = 0;
    threadQueuedBytes -= this.#queuedBytes;
    this.#queuedBytes = 0;
  }

  /** True when sent or refused for good (too large); false when the ring is full. */
  #tryEmit(kind: number, key: string, payload: Uint8Array): boolean {
    try {
      return this.#ctx.emit(kind, key, payload);
    } catch (err) {
      this.#dropped++;
      this.#ctx.logger.error({ kind, key, bytes: payload.byteLength, err: errorMessage(err) }, 'frame refused by the runtime; dropped');
      return true;
    }
  }

  async #flush(): Promise<void> {
    try {
      while (this.#queue.length > 0 && !this.#closed) {
        const next = this.#queue[0]!;
        if (this.#tryEmit(next.kind, next.key, next.payload)) {
          this.#queue.shift();
          this.#queuedBytes -= next.payload.byteLength;
          threadQueuedBytes -= next.payload.byteLength;
        } else {
          await this.#ctx.whenWritable(next.key, next.payload.byteLength);
        }
      }
    } finally {
      this.#flushRunning = false;
    }
  }
}
