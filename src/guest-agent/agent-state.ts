/**
 * The agent's own lifecycle (not the server's view of it, which adds Stale and Disconnected), on
 * the core StateMachine (src/core/state-machine.ts), so every move is guarded, logged and counted
 * like the server's lifecycles:
 *
 *   idle ──► connecting ◄──► registered
 *     │          │               │
 *     └──────────┴───► stopping ◄┘ ──► stopped
 *
 * connecting → registered on an accepted RegistrationAck; registered → connecting when the
 * stream ends; any live state → stopping on SIGTERM/SIGINT or ShutdownSignal.
 */
import { StateMachine, transitionTableMarkdown, type TransitionLogger, type TransitionTable } from '../core/state-machine.js';

export const AGENT_STATES = ['idle', 'connecting', 'registered', 'stopping', 'stopped'] as const;
export type AgentState = (typeof AGENT_STATES)[number];

/** States in which the agent works (dials, is registered, or is about to dial). */
export const LIVE_AGENT_STATES = ['idle', 'connecting', 'registered'] as const satisfies readonly AgentState[];

/** Allowed moves; see the file comment. */
export const AGENT_STATE_TABLE: TransitionTable<AgentState> = {
  idle: ['connecting', 'stopping'],
  connecting: ['registered', 'stopping'],
  registered: ['connecting', 'stopping'],
  stopping: ['stopped'],
  stopped: [],
};

/** Causes of the moves (the `cause` of transition()); the detail goes in the log line's `reason`. */
export const AgentStateCause = {
  /** The agent starts dialing the server. */
  dialing: 'dialing',
  /** The server accepted the registration. */
  registered: 'registration_accepted',
  /** The management stream ended (server gone, network, refused registration). */
  streamEnded: 'stream_ended',
  /** SIGTERM/SIGINT or a ShutdownSignal from the server. */
  stopRequested: 'stop_requested',
  /** Commands are stopped, output flushed, the stream closed. */
  stopCompleted: 'stop_completed',
} as const;

/** The table as Markdown, for the README. */
export function agentStateTableMarkdown(): string {
  return transitionTableMarkdown(AGENT_STATE_TABLE, {
    idle: { connecting: 'the agent starts and dials the server', stopping: 'SIGTERM/SIGINT before the first dial' },
    connecting: { registered: 'the server accepts the registration (RegistrationAck)', stopping: 'SIGTERM/SIGINT or ShutdownSignal' },
    registered: { connecting: 'the stream ended; redial with backoff', stopping: 'SIGTERM/SIGINT or ShutdownSignal' },
    stopping: { stopped: 'commands stopped, pending output flushed, stream closed' },
  });
}

/** A machine for the agent's lifecycle, starting idle. */
export function agentLifecycle(logger?: TransitionLogger): StateMachine<AgentState> {
  return new StateMachine<AgentState>({
    name: 'agent lifecycle',
    initial: 'idle',
    table: AGENT_STATE_TABLE,
    ...(logger !== undefined ? { logger } : {}),
  });
}
