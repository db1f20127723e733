/**
 * The agent's own lifecycle (not the server's view of it, which adds Stale and Disconnected):
 *
 *   idle ──► connecting ◄──► registered
 *     │          │               │
 *     └──────────┴───► stopping ◄┘ ──► stopped
 *
 * connecting → registered on an accepted RegistrationAck; registered → connecting when the
 * stream ends; any live state → stopping on SIGTERM/SIGINT or ShutdownSignal.
 */
import type { Logger } from './log.js';

export type AgentState = 'idle' | 'connecting' | 'registered' | 'stopping' | 'stopped';

const TRANSITIONS: Readonly<Record<AgentState, readonly AgentState[]>> = {
  idle: ['connecting', 'stopping'],
  connecting: ['registered', 'stopping'],
  registered: ['connecting', 'stopping'],
  stopping: ['stopped'],
  stopped: [],
};

export class AgentLifecycle {
  readonly #log: Logger;
  #state: AgentState = 'idle';

  constructor(log: Logger) {
    this.#log = log;
  }

  get state(): AgentState {
    return this.#state;
  }

  /** Moves to `to` when the table allows it from the current state (logged); false otherwise. */
  transition(to: AgentState, cause: string): boolean {
    const from = this.#state;
    if (from === to) return true;
    if (!TRANSITIONS[from].includes(to)) return false;
    this.#state = to;
    this.#log.debug({ from, to, cause }, 'agent state');
    return true;
  }
}
