/**
 * Session lifecycle (STYLE point 8): the states, the allowed moves and their causes.
 *
 *   starting ──pty_started──► running ──agent_disconnected / server_restarted──► detached
 *      │                        ▲  │                                                │
 *      │                        │  └──────── exited / killed ──────► closed ◄───────┤
 *      │                        └──────── reported / reattached ────────────────────┘
 *      └── start_failed / exited / agent_disconnected ──► closed / detached
 *
 * `detached` means no PTY command is known to be attached: the agent is away, sandboxd just
 * restarted, or the agent restarted and the tmux session waits for a re-attach. A detached
 * session is never killed for being detached; only an explicit DELETE or the server's
 * reconciliation (an agent reporting a session the server does not know) kills.
 */
import type { TransitionTable } from '../core/state-machine.js';
import { transitionTableMarkdown } from '../core/state-machine.js';
import type { SessionState } from './session-types.js';

export const SessionCause = {
  /** The agent accepted the PTY command. */
  ptyStarted: 'pty_started',
  /** The agent could not be reached or refused the command. */
  startFailed: 'start_failed',
  /** The agent's stream ended. */
  agentDisconnected: 'agent_disconnected',
  /** sandboxd loaded the session from its store at start. */
  serverRestarted: 'server_restarted',
  /** A SessionReport listed the session's command. */
  reported: 'reported',
  /** A new PTY command attached to the surviving tmux session. */
  reattached: 'reattached',
  /** The PTY command ended (CommandResult) and the tmux session with it. */
  exited: 'exited',
  /** DELETE or reconciliation killed it. */
  killed: 'killed',
  /** Reconciliation found neither the command nor the tmux session. */
  notFound: 'not_found',
} as const;
export type SessionCauseName = (typeof SessionCause)[keyof typeof SessionCause];

export const SESSION_TRANSITIONS: TransitionTable<SessionState> = {
  starting: ['running', 'detached', 'closed'],
  running: ['detached', 'closed'],
  detached: ['running', 'closed'],
  closed: [],
};

/** The lifecycle table for the README. */
export function sessionTransitionsMarkdown(): string {
  return transitionTableMarkdown(SESSION_TRANSITIONS, {
    starting: {
      running: SessionCause.ptyStarted,
      detached: SessionCause.agentDisconnected,
      closed: `${SessionCause.startFailed}, ${SessionCause.exited}`,
    },
    running: {
      detached: `${SessionCause.agentDisconnected}, ${SessionCause.serverRestarted}`,
      closed: `${SessionCause.exited}, ${SessionCause.killed}`,
    },
    detached: {
      running: `${SessionCause.reported}, ${SessionCause.reattached}`,
      closed: `${SessionCause.killed}, ${SessionCause.notFound}, ${SessionCause.exited}`,
    },
  });
}
