/**
 * The controller lease and the membership of one session (spec part 3 "Controller lease").
 *
 * - At most one controller. A controller request while another LIVE controller holds the lease
 *   is granted as observer with reason `lease_held`; the reply names both roles, and clients must
 *   use the granted one.
 * - A holder that is no longer live (its connection closed, it missed pongs, it was dropped for
 *   not reading) is reaped before a request is judged, so a dead controller never blocks one.
 * - The lease frees when the controller leaves, asks for observer, or is removed.
 * - Only the controller may write input or resize ({@link Membership.mayDrive}).
 *
 * Pure logic: no sockets, no timers. Liveness is the caller's (`isLive`).
 */
import { StateMachine, transitionTableMarkdown, type TransitionLogger, type TransitionTable } from '../core/state-machine.js';
import type { SessionRole } from './session-types.js';

export type LeaseState = 'free' | 'held';

export const LeaseCause = {
  granted: 'granted',
  released: 'released',
  controllerLeft: 'controller_left',
  controllerDead: 'controller_dead',
} as const;

export const LEASE_TABLE: TransitionTable<LeaseState> = { free: ['held'], held: ['free'] };

/** The lease's table as Markdown, for the README. */
export function leaseTransitionsMarkdown(): string {
  return transitionTableMarkdown(LEASE_TABLE, {
    free: { held: `${LeaseCause.granted}: a client asks for controller while the lease is free` },
    held: {
      free: `${LeaseCause.released} (the controller asks for observer), ${LeaseCause.controllerLeft}, ${LeaseCause.controllerDead} (reaped before a grant)`,
    },
  });
}

export interface RoleGrant {
  readonly role: SessionRole;
  readonly requestedRole: SessionRole;
  /** Why the granted role differs from the requested one, or why the lease moved. */
  readonly reason?: 'lease_held' | 'released';
}

export interface MembershipSnapshot {
  controllers: string[];
  observers: string[];
  attachment_count: number;
}

export interface MembershipOptions {
  /** Whether a member's connection is still usable; a dead controller is reaped before a grant. */
  readonly isLive: (clientId: string) => boolean;
  readonly logger?: TransitionLogger;
  readonly logFields?: object;
  /** After every lease move (count it, log it). */
  readonly onLeaseChange?: (state: LeaseState, holder: string | undefined, cause: string) => void;
}

export class Membership {
  readonly #opts: MembershipOptions;
  readonly #lease: StateMachine<LeaseState>;
  /** Members in join order. */
  readonly #members = new Set<string>();
  #holder: string | undefined;

  constructor(opts: MembershipOptions) {
    this.#opts = opts;
    this.#lease = new StateMachine<LeaseState>({
      name: 'controller lease',
      initial: 'free',
      table: LEASE_TABLE,
      ...(opts.logger !== undefined && { logger: opts.logger }),
      ...(opts.logFields !== undefined && { logFields: opts.logFields }),
    });
  }

  get controller(): string | undefined {
    return this.#holder;
  }

  get size(): number {
    return this.#members.size;
  }

  has(clientId: string): boolean {
    return this.#members.has(clientId);
  }

  roleOf(clientId: string): SessionRole | undefined {
    if (!this.#members.has(clientId)) return undefined;
    return this.#holder === clientId ? 'controller' : 'observer';
  }

  /** Only the lease holder may write input and resize. */
  mayDrive(clientId: string): boolean {
    return this.#holder !== undefined && this.#holder === clientId;
  }

  /** Adds a member with the role it asks for (default observer), downgraded when the lease is held. */
  join(clientId: string, requested: SessionRole = 'observer'): RoleGrant {
    this.#members.add(clientId);
    if (requested === 'observer') return { role: 'observer', requestedRole: 'observer' };
    return this.#tryAcquire(clientId);
  }

  /** Role change of a member: controller → observer releases; observer → controller if free. */
  requestRole(clientId: string, requested: SessionRole): RoleGrant {
    if (!this.#members.has(clientId)) throw new Error(`client ${clientId} is not a member`);
    if (requested === 'controller') return this.#tryAcquire(clientId);
    if (this.#holder === clientId) {
      this.#free(LeaseCause.released);
      return { role: 'observer', requestedRole: 'observer', reason: 'released' };
    }
    return { role: 'observer', requestedRole: 'observer' };
  }

  /** Removes a member (left, closed, timed out, dropped); frees the lease if it held it. */
  leave(clientId: string, cause: string = LeaseCause.controllerLeft): { wasController: boolean } {
    if (!this.#members.delete(clientId)) return { wasController: false };
    const wasController = this.#holder === clientId;
    if (wasController) this.#free(cause);
    return { wasController };
  }

  snapshot(): MembershipSnapshot {
    const observers = [...this.#members].filter((id) => id !== this.#holder);
    return { controllers: this.#holder === undefined ? [] : [this.#holder], observers, attachment_count: this.#members.size };
  }

  #tryAcquire(clientId: string): RoleGrant {
    if (this.#holder === clientId) return { role: 'controller', requestedRole: 'controller' };
    if (this.#holder !== undefined && !this.#opts.isLive(this.#holder)) this.leave(this.#holder, LeaseCause.controllerDead);
    if (this.#holder !== undefined) return { role: 'observer', requestedRole: 'controller', reason: 'lease_held' };
    this.#holder = clientId;
    this.#lease.transition(['free'], 'held', LeaseCause.granted);
    this.#opts.onLeaseChange?.('held', clientId, LeaseCause.granted);
    return { role: 'controller', requestedRole: 'controller' };
  }

  #free(cause: string): void {
    this.#holder = undefined;
    this.#lease.transition(['held'], 'free', cause);
    this.#opts.onLeaseChange?.('free', undefined, cause);
  }
}
