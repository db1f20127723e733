/**
 * The desktop resource's lifecycle (spec part 3 "Desktop resource"; STYLE point 8: on the
 * project's state-machine type). Three independent state strings and one flag:
 *
 *   desired:  active ──close──► closed
 *   observed: unknown ◄──► connected ◄──► disconnected, any ──► gone   (what the backend reports)
 *   cleanup:  none ──close with sign_out──► pending ──► done | failed
 *   fenced:   false ──close──► true (never back: a fenced resource issues and redeems no grant)
 *
 * A new resource is desired active, observed unknown, cleanup none, fenced false, generation 1.
 * Close moves desired to closed, sets fenced and bumps the generation (the fencing token every
 * grant carries); with sign_out it also moves cleanup to pending. The spec leaves the full value
 * sets "not shown": these are ours.
 */
import { StateMachine, transitionTableMarkdown, type TransitionLogger, type TransitionTable } from '../core/state-machine.js';
import type { DesktopCleanup, DesktopDesired, DesktopObserved } from '../wire/desktop.js';

export const DESIRED_TABLE: TransitionTable<DesktopDesired> = {
  active: ['closed'],
  closed: [],
};

export const OBSERVED_TABLE: TransitionTable<DesktopObserved> = {
  unknown: ['connected', 'disconnected', 'gone'],
  connected: ['disconnected', 'gone'],
  disconnected: ['connected', 'gone'],
  gone: [],
};

export const CLEANUP_TABLE: TransitionTable<DesktopCleanup> = {
  none: ['pending'],
  pending: ['done', 'failed'],
  done: [],
  failed: [],
};

/** Moves one of the three states of desktop `id`; returns the new state, or null when the guard or the table refused. */
export function moveDesktop<S extends string>(
  which: 'desired' | 'observed' | 'cleanup',
  table: TransitionTable<S>,
  id: string,
  current: S,
  from: readonly S[],
  to: S,
  cause: string,
  logger?: TransitionLogger,
): S | null {
  const m = new StateMachine<S>({
    name: `desktop ${which}`,
    initial: current,
    table,
    ...(logger !== undefined && { logger }),
    logFields: { desktop: id },
  });
  return m.transition(from, to, cause) ? m.state : null;
}

/** README's desktop tables. */
export function desktopTablesMarkdown(): string {
  return [
    '`desired`:',
    '',
    transitionTableMarkdown(DESIRED_TABLE, { active: { closed: 'close (any sign_out); fences the resource' } }),
    '',
    '`observed` (reported by the backend):',
    '',
    transitionTableMarkdown(OBSERVED_TABLE, {
      unknown: { connected: 'a grant was redeemed into a session', disconnected: 'the session dropped', gone: 'the session ended' },
      connected: { disconnected: 'the session dropped', gone: 'the session ended' },
      disconnected: { connected: 'a reconnect grant was redeemed', gone: 'the session ended' },
    }),
    '',
    '`cleanup`:',
    '',
    transitionTableMarkdown(CLEANUP_TABLE, {
      none: { pending: 'close with sign_out true' },
      pending: { done: 'the backend signed the guest session out', failed: 'the backend could not' },
    }),
  ].join('\n');
}
