/**
 * The one contract every part of the server implements, and what the composition root
 * (src/main.ts `startServer`) hands each part when it starts it.
 *
 * A component is started once, in list order, with a context through which it finds what earlier
 * components provided (`need`, `find`) and provides its own (`provide`). What it answers tells the
 * root what to wire: routes for the shared router, WebSocket routes for the HTTP listener, a
 * handler per actor frame kind (a kind claimed twice is a start-up error), what to do when an actor
 * shard restarts, and how to stop. The root marks the component's readiness names ready once it
 * started, and stops the components in reverse order within the shutdown deadline.
 *
 * Services are typed by name: each feature adds its own to {@link Services} by declaration merging
 * (`declare module '../component/component.js' { interface Services { vms: VmService } }`), so this
 * file knows no feature, and `ctx.need('vms')` has the feature's type.
 */
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { Readiness } from '../core/readiness.js';
import type { Router } from '../http/router.js';
import type { WsRouteOptions } from '../http/ws-route.js';
import type { Metrics } from '../observability/metrics.js';

/** What components provide, by name. Empty here; each feature adds its own entries. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by declaration merging
export interface Services {}

/** Takes one frame an actor emitted (ActorSystem onEmit). Must not throw. */
export type FrameHandler = (kind: number, key: string, payload: Uint8Array) => void;

export interface ComponentContext {
  readonly config: Config;
  /** The server's logger; components bind their own `component` child. */
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly readiness: Readiness;
  /** When startServer was called (uptime). */
  readonly startedAtMs: number;
  /** Modules defining the actor types every shard hosts: every listed component's `actorModules`. */
  readonly actorModules: readonly URL[];
  /** ActorSystem onEmit: hands the frame to the component that claimed its kind. */
  readonly dispatchFrame: FrameHandler;
  /** ActorSystem onShardRestart: counts and logs it, then tells every component that asked. */
  readonly shardRestarted: (shardIndex: number, lostActorIds: string[]) => void;
  /** The routes registered so far (tests drive them with inject; the HTTP listener serves them). */
  readonly router: Router;
  /** WebSocket routes of the components started so far (the HTTP listener takes them at start). */
  readonly wsRoutes: readonly WsRouteOptions[];
  /** A service an earlier component provided; a start-up error naming both when there is none. */
  need<K extends keyof Services>(name: K): Services[K];
  /** A service if some component provided it (for links that are optional or looked up late). */
  find<K extends keyof Services>(name: K): Services[K] | undefined;
  /** Provides a service to the components after this one (and to the server handle). */
  provide<K extends keyof Services>(name: K, service: Services[K]): void;
}

/** What a started component asks the root to wire. */
export interface Started {
  /** Registers its HTTP routes on the shared router. */
  readonly routes?: (router: Router) => void;
  /** Its WebSocket routes on the HTTP listener (components listed before the listener only). */
  readonly wsRoutes?: readonly WsRouteOptions[];
  /** Its handler per actor frame kind (kinds from actors/protocol/frame-kinds.ts). */
  readonly frames?: ReadonlyMap<number, FrameHandler>;
  /** Actors lost with a crashed shard (the shard was restarted empty). */
  readonly onShardRestart?: (shardIndex: number, lostActorIds: readonly string[]) => void;
  /** Stops what start started. Idempotent. */
  stop(): Promise<void>;
}

export interface Component {
  /** Names it in logs and start-up errors. */
  readonly name: string;
  /** Readiness names it marks ready once started (expected from the moment the server starts). */
  readonly readiness?: readonly string[];
  /** Actor modules its actors are defined in (listed in the ActorSystem's actorModules). */
  readonly actorModules?: readonly URL[];
  start(ctx: ComponentContext): Promise<Started>;
}

/** One handler for several kinds (a feature whose actors emit many kinds into one switch). */
export function framesOf(kinds: readonly number[], handler: FrameHandler): ReadonlyMap<number, FrameHandler> {
  return new Map(kinds.map((k) => [k, handler]));
}
