/**
 * Which lifecycle events a change of observed state means. Pure: the poller, our own calls and
 * the virsh event source all feed observations through this one table, so one change gives the
 * same events whoever noticed it, and a change seen twice gives no second event.
 *
 *   before → after                       events (reason)
 *   absent → present                     vm.defined (added), then as stopped → after
 *   present → absent                     as before → stopped, then vm.undefined (removed)
 *   stopped|crashed → running            vm.started (booted)
 *   stopped|crashed → paused             vm.started (booted), vm.suspended (paused)
 *   paused → running                     vm.resumed (unpaused)
 *   suspended → running                  vm.resumed (wakeup)
 *   running|shutdown → paused            vm.suspended (paused)
 *   running|paused → suspended           vm.pmsuspended (memory)
 *   running|paused → shutdown            vm.shutdown (guest) — unless our own request already announced it
 *   active → stopped                     vm.stopped (hint, e.g. shutdown or destroyed; else unknown)
 *   any → crashed                        vm.crashed (crashed)
 *   running → running, new domain id     vm.rebooted (restarted): it went down and up between two looks
 *   anything ↔ unknown, same → same      nothing
 */
import type { VmEventType, VmState } from './port.js';

/** What one look at a domain found. */
export interface Observation {
  readonly state: VmState;
  /** libvirt's runtime id (changes on every start); null while inactive. */
  readonly id: number | null;
}

export interface TransitionContext {
  /** Reason for the stop when known (our own destroy/shutdown, or libvirt's event detail). */
  readonly stopReason?: string;
  /** Our own ACPI request already produced vm.shutdown for this episode. */
  readonly shutdownAnnounced?: boolean;
  /** Reason for a start when known (booted, restored, wakeup...). */
  readonly startReason?: string;
}

export interface TransitionEvent {
  readonly type: VmEventType;
  readonly reason: string;
}

const ACTIVE: ReadonlySet<VmState> = new Set<VmState>(['running', 'paused', 'shutdown', 'suspended']);

/** True for states in which the domain has a live process (libvirt "active"). */
export function isActive(state: VmState): boolean {
  return ACTIVE.has(state);
}

/** The events between two observations of one domain (null = the domain does not exist). */
export function transitionEvents(before: Observation | null, after: Observation | null, ctx: TransitionContext = {}): TransitionEvent[] {
  if (before === null && after === null) return [];
  if (before === null) {
    return [{ type: 'vm.defined', reason: 'added' }, ...stateEvents('stopped', after!.state, false, ctx)];
  }
  if (after === null) {
    return [...stateEvents(before.state, 'stopped', false, ctx), { type: 'vm.undefined', reason: 'removed' }];
  }
  const restarted =
    before.state === 'running' && after.state === 'running' && before.id !== null && after.id !== null && before.id !== after.id;
  return stateEvents(before.state, after.state, restarted, ctx);
}

function stateEvents(from: VmState, to: VmState, restarted: boolean, ctx: TransitionContext): TransitionEvent[] {
  if (restarted) return [{ type: 'vm.rebooted', reason: 'restarted' }];
  if (from === to || from === 'unknown' || to === 'unknown') return [];
  if (to === 'crashed') return [{ type: 'vm.crashed', reason: 'crashed' }];
  const wasActive = isActive(from);
  switch (to) {
    case 'running':
      if (!wasActive) return [{ type: 'vm.started', reason: ctx.startReason ?? 'booted' }];
      if (from === 'paused') return [{ type: 'vm.resumed', reason: 'unpaused' }];
      if (from === 'suspended') return [{ type: 'vm.resumed', reason: 'wakeup' }];
      return []; // shutdown → running: the guest ignored or cancelled the request
    case 'paused':
      if (!wasActive)
        return [
          { type: 'vm.started', reason: ctx.startReason ?? 'booted' },
          { type: 'vm.suspended', reason: 'paused' },
        ];
      return [{ type: 'vm.suspended', reason: 'paused' }];
    case 'suspended':
      if (!wasActive)
        return [
          { type: 'vm.started', reason: ctx.startReason ?? 'booted' },
          { type: 'vm.pmsuspended', reason: 'memory' },
        ];
      return [{ type: 'vm.pmsuspended', reason: 'memory' }];
    case 'shutdown':
      if (!wasActive) return [{ type: 'vm.started', reason: ctx.startReason ?? 'booted' }];
      return ctx.shutdownAnnounced === true ? [] : [{ type: 'vm.shutdown', reason: 'guest' }];
    case 'stopped':
      // crashed → stopped (reset after a crash) is not a new stop.
      return wasActive ? [{ type: 'vm.stopped', reason: ctx.stopReason ?? 'unknown' }] : [];
  }
}
