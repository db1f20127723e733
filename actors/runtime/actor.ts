/**
 * What an actor sees. An actor is addressed by a string id, lives in the shard its id hashes
 * to, and is driven one message at a time by its shard's thread (a worker, or the main thread in
 * inline mode), so its state needs no locks.
 *
 * A module that defines actor types exports `actorTypes: Record<string, ActorFactory>`; the
 * ActorSystem is given the module URLs and every shard imports them.
 */

/** pino-compatible logger subset: `(obj, msg)`. */
export interface ActorLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** The actor's handle on its runtime. */
export interface ActorContext {
  readonly id: string;
  readonly type: string;
  /** Index of the shard hosting this actor (0-based). */
  readonly shardIndex: number;
  /** Logs with `{ actor: id, actorType: type, shard }` bound. */
  readonly logger: ActorLogger;
  /**
   * Sends one frame to the main thread, which hands it to the system's onEmit. The payload is
   * copied before emit returns. Returns false — and sends nothing — when the outbound ring is
   * full: the actor must keep the data and retry after `await ctx.whenWritable(key, bytes)`
   * (nothing is dropped for it). Throws RangeError for a kind outside 1..255, a key over
   * 65,535 UTF-8 bytes, or a frame over the ring's maxRecordBytes (ringBytes − 4).
   */
  emit(kind: number, key: string, payload: Uint8Array): boolean;
  /** Resolves once a frame with this key and `payloadBytes` of payload would fit (or the shard is stopping). */
  whenWritable(key: string, payloadBytes: number): Promise<void>;
  /** Asks the system to spawn another actor (in whatever shard its id hashes to); failures are logged. */
  spawn(type: string, id: string, init?: unknown): void;
  /** Stops this actor after the current handler returns; later frames for its id are undeliverable. */
  stopSelf(): void;
}

/** An actor instance. All handlers are optional. */
export interface Actor {
  /**
   * One data frame (ActorSystem.send). The payload view is valid only during the call — in
   * workers mode it points into the shared ring — so copy what you keep. Exceptions are logged
   * and counted; the actor keeps running.
   */
  receive?(kind: number, payload: Uint8Array): void;
  /**
   * A control call (ActorSystem.call). Args and result are structured-cloned across the thread.
   * Throw SvcError to return a coded error; anything else becomes server.internal.
   */
  call?(method: string, args: unknown): unknown;
  /** Called once when the actor is stopped (stopActor, stopSelf, system stop). */
  stop?(): void | Promise<void>;
}

/** Builds an actor; `init` is the spawn argument (structured-cloned in workers mode). */
export type ActorFactory = (ctx: ActorContext, init: unknown) => Actor;

/** The shape of a module listed in ActorSystem's actorModules. */
export interface ActorModule {
  actorTypes: Record<string, ActorFactory>;
}
