/**
 * Ordered delivery of frames from the main thread to one actor, honouring the shard ring's
 * backpressure (ActorSystem.send returns false when the inbound ring is full): a frame that does
 * not fit waits, and so does everything after it, until whenWritable. Nothing is dropped while
 * the system runs, and frames keep their order, so an agent's Attach, messages and Detach reach
 * its actor in the order they happened. Outbox (outbox.ts) is the same rule inside an actor.
 */

/** The part of ActorSystem a lane and its owner use (an interface, so tests can stand in for it). */
export interface ActorPort {
  send(id: string, kind: number, payload: Uint8Array): boolean;
  whenWritable(id: string, payloadBytes: number, signal?: AbortSignal): Promise<void>;
  spawn(type: string, id: string, init?: unknown, opts?: { timeoutMs?: number }): Promise<void>;
  call<T = unknown>(id: string, method: string, args?: unknown, opts?: { timeoutMs?: number }): Promise<T>;
  stopActor(id: string, opts?: { timeoutMs?: number }): Promise<void>;
}

interface Queued {
  readonly kind: number;
  readonly payload: Uint8Array;
}

export class ActorLane {
  readonly #actors: ActorPort;
  readonly #actorId: string;
  readonly #onError: (err: unknown) => void;
  readonly #queue: Queued[] = [];
  #flushing = false;
  #drainedWaiters: (() => void)[] = [];
  #closed = false;

  /** @param onError a send that threw (system stopping, frame too large): the frame is dropped. */
  constructor(actors: ActorPort, actorId: string, onError: (err: unknown) => void) {
    this.#actors = actors;
    this.#actorId = actorId;
    this.#onError = onError;
  }

  /** Frames waiting for room. */
  get queued(): number {
    return this.#queue.length;
  }

  /**
   * Sends now, or queues behind earlier frames. Returns true when the frame went out at once,
   * false when it waits (the caller should stop reading its source until drained()). A queued
   * payload is kept as is: pass a buffer nobody else will change.
   */
  push(kind: number, payload: Uint8Array): boolean {
    if (this.#closed) return true;
    if (this.#queue.length === 0 && this.#trySend(kind, payload)) return true;
    this.#queue.push({ kind, payload });
    if (!this.#flushing) {
      this.#flushing = true;
      void this.#flush();
    }
    return false;
  }

  /** Resolves when nothing waits (at once when nothing does). */
  drained(): Promise<void> {
    if (this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainedWaiters.push(resolve));
  }

  /** Drops what waits and refuses later frames (the actor is gone or the system stops). */
  close(): void {
    this.#closed = true;
    this.#queue.length = 0;
    this.#wakeDrained();
  }

  /** True when sent or dropped for good; false when the ring is full. */
  #trySend(kind: number, payload: Uint8Array): boolean {
    try {
      return this.#actors.send(this.#actorId, kind, payload);
    } catch (err) {
      this.#onError(err);
      return true;
    }
  }

  async #flush(): Promise<void> {
    try {
      while (this.#queue.length > 0 && !this.#closed) {
        const next = this.#queue[0]!;
        if (this.#trySend(next.kind, next.payload)) this.#queue.shift();
        else await this.#actors.whenWritable(this.#actorId, next.payload.byteLength);
      }
    } catch (err) {
      this.#onError(err);
      this.#queue.length = 0;
    } finally {
      this.#flushing = false;
      this.#wakeDrained();
    }
  }

  #wakeDrained(): void {
    const waiters = this.#drainedWaiters;
    this.#drainedWaiters = [];
    for (const w of waiters) w();
  }
}
