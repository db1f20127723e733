/**
 * ActorHost: the actors of one shard and the rules for driving them. The same class runs inside
 * each shard worker (fed from the inbound ring, emitting into the outbound ring) and on the main
 * thread in inline mode (direct calls), so both modes behave alike.
 */
import { SvcError } from '../../src/core/errors.js';
import type { Actor, ActorContext, ActorLogger } from './actor.js';
import type { ActorTypes } from './actor-registry.js';
import { settledWithin } from './deadline.js';

/** How a host reaches the outside: the outbound path and the system's directory. */
export interface HostIo {
  /** Same contract as ActorContext.emit. */
  emit(kind: number, key: string, payload: Uint8Array): boolean;
  whenWritable(key: string, payloadBytes: number): Promise<void>;
  /** Route a spawn request to the system (the new id may hash to another shard). */
  spawn(type: string, id: string, init: unknown): void;
  /** Actor `id` (this incarnation) stopped on its own (stopSelf). */
  stopped(id: string, incarnation: number): void;
}

export interface HostCounters {
  /** Data frames handed to an actor. */
  delivered: number;
  /** Data frames whose actor id does not exist here (counted and logged, never silent). */
  undeliverable: number;
  /** Exceptions thrown by receive or stop handlers. */
  actorErrors: number;
}

interface Slot {
  readonly type: string;
  readonly incarnation: number;
  actor: Actor | undefined;
}

function errorFields(err: unknown): object {
  return err instanceof Error ? { err: { message: err.message, stack: err.stack, name: err.name } } : { err: String(err) };
}

export class ActorHost {
  readonly shardIndex: number;
  readonly counters: HostCounters = { delivered: 0, undeliverable: 0, actorErrors: 0 };
  readonly #types: ActorTypes;
  readonly #io: HostIo;
  readonly #logger: ActorLogger;
  readonly #actors = new Map<string, Slot>();
  #nextIncarnation = 1;

  constructor(opts: { shardIndex: number; types: ActorTypes; io: HostIo; logger: ActorLogger }) {
    this.shardIndex = opts.shardIndex;
    this.#types = opts.types;
    this.#io = opts.io;
    this.#logger = opts.logger;
  }

  /** Number of live actors. */
  get size(): number {
    return this.#actors.size;
  }

  /**
   * Creates actor `id` of `type`; returns its incarnation number (unique in this host).
   * Throws SvcError actor.already_exists, or request.invalid for an unknown type or empty id;
   * whatever the factory throws propagates.
   */
  spawn(type: string, id: string, init: unknown): number {
    if (typeof id !== 'string' || id.length === 0) throw new SvcError('request.invalid', 'actor id must be a non-empty string');
    if (this.#actors.has(id)) throw new SvcError('actor.already_exists', `actor ${id} already exists`, { id });
    const factory = this.#types.get(type);
    if (factory === undefined) throw new SvcError('request.invalid', `unknown actor type ${type}`, { type });
    const slot: Slot = { type, incarnation: this.#nextIncarnation++, actor: undefined };
    // Registered before the factory runs so a factory may emit or stopSelf at once.
    this.#actors.set(id, slot);
    try {
      slot.actor = factory(this.#context(id, slot), init);
    } catch (err) {
      if (this.#actors.get(id) === slot) this.#actors.delete(id);
      throw err;
    }
    return slot.incarnation;
  }

  /** True while actor `id` lives here. */
  has(id: string): boolean {
    return this.#actors.has(id);
  }

  /** Hands a data frame to actor `id`; false (and counted) when there is no such actor. */
  deliver(kind: number, id: string, payload: Uint8Array): boolean {
    const slot = this.#actors.get(id);
    if (slot?.actor === undefined) {
      const n = ++this.counters.undeliverable;
      if ((n & (n - 1)) === 0) {
        // Logged at 1, 2, 4, 8, … occurrences: visible without flooding the log.
        this.#logger.warn({ shard: this.shardIndex, actor: id, kind, undeliverable: n }, 'data frame for an unknown actor');
      }
      return false;
    }
    this.counters.delivered++;
    try {
      slot.actor.receive?.(kind, payload);
    } catch (err) {
      this.counters.actorErrors++;
      this.#logger.error({ shard: this.shardIndex, actor: id, actorType: slot.type, ...errorFields(err) }, 'actor receive threw');
    }
    return true;
  }

  /** Runs actor `id`'s call handler. Rejects SvcError actor.not_found, or whatever the handler throws. */
  async call(id: string, method: string, args: unknown): Promise<unknown> {
    const slot = this.#actors.get(id);
    if (slot?.actor === undefined) throw new SvcError('actor.not_found', `no actor ${id}`, { id });
    if (slot.actor.call === undefined) throw new SvcError('request.invalid', `actor ${id} (${slot.type}) takes no calls`, { id });
    return await slot.actor.call(method, args);
  }

  /** Stops and removes actor `id`. Rejects SvcError actor.not_found; a throwing stop handler is logged. */
  async stopActor(id: string): Promise<void> {
    const slot = this.#actors.get(id);
    if (slot === undefined) throw new SvcError('actor.not_found', `no actor ${id}`, { id });
    this.#actors.delete(id);
    await this.#runStop(id, slot);
  }

  /** Stops every actor, giving their stop handlers `deadlineMs` in total. */
  async stopAll(deadlineMs: number): Promise<void> {
    const slots = [...this.#actors];
    this.#actors.clear();
    await settledWithin(Promise.all(slots.map(([id, slot]) => this.#runStop(id, slot))), deadlineMs);
  }

  /** Ids of the live actors. */
  ids(): string[] {
    return [...this.#actors.keys()];
  }

  async #runStop(id: string, slot: Slot): Promise<void> {
    try {
      await slot.actor?.stop?.();
    } catch (err) {
      this.counters.actorErrors++;
      this.#logger.error({ shard: this.shardIndex, actor: id, actorType: slot.type, ...errorFields(err) }, 'actor stop threw');
    }
  }

  #context(id: string, slot: Slot): ActorContext {
    const io = this.#io;
    const bound = { shard: this.shardIndex, actor: id, actorType: slot.type };
    const base = this.#logger;
    const logger: ActorLogger = {
      info: (obj, msg) => base.info({ ...bound, ...obj }, msg),
      warn: (obj, msg) => base.warn({ ...bound, ...obj }, msg),
      error: (obj, msg) => base.error({ ...bound, ...obj }, msg),
    };
    return {
      id,
      type: slot.type,
      shardIndex: this.shardIndex,
      logger,
      emit: (kind, key, payload) => io.emit(kind, key, payload),
      whenWritable: (key, payloadBytes) => io.whenWritable(key, payloadBytes),
      spawn: (type, childId, init) => io.spawn(type, childId, init),
      stopSelf: () => {
        if (this.#actors.get(id) !== slot) return;
        this.#actors.delete(id);
        io.stopped(id, slot.incarnation);
        // After the current handler returns, as documented.
        queueMicrotask(() => void this.#runStop(id, slot));
      },
    };
  }
}
