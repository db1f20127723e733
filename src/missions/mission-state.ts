/**
 * The mission lifecycle (STYLE point 8: on the project's state-machine type), and the mission
 * event vocabulary (spec part 6 names only mission.failed; the rest is ours).
 *
 *   assigned ──started──► running ──exit 0──► completed
 *      │                     └──exit ≠ 0, timeout, killed, agent lost──► failed
 *      └──cannot start, dispatcher error──► failed
 *
 * - assigned: the dispatch was accepted and the command sent to the executor's agent.
 * - running: the command showed a sign of life (output, or a result) or the start window passed.
 * - completed: the command exited 0.
 * - failed: it could not start, exited non-zero, timed out, was killed, or was lost with its
 *   agent or a server restart (details.reason says which).
 */
import { StateMachine, transitionTableMarkdown, type TransitionLogger, type TransitionTable } from '../core/state-machine.js';

export const MISSION_STATUSES = ['assigned', 'running', 'completed', 'failed'] as const;
export type MissionStatus = (typeof MISSION_STATUSES)[number];

export const MISSION_TABLE: TransitionTable<MissionStatus> = {
  assigned: ['running', 'failed'],
  running: ['completed', 'failed'],
  completed: [],
  failed: [],
};

/** The mission event types (declared with the wire shapes: the dashboard offers them too). */
export { MISSION_EVENT_TYPES, type MissionEventType } from '../wire/missions.js';

/** details.reason of mission.failed. */
export const MISSION_FAILURE_REASONS = {
  start_failed:
    'the command could not start on the agent (no such program, bad working directory); the dispatch answered 500 (202 when this was seen only after the start window)',
  dispatch_error: 'the dispatcher could not hand the command to the agent; the dispatch answered 500',
  exit_nonzero: 'the command exited with a non-zero code',
  timeout: 'the command ran past its timeout (SVC_MISSION_TIMEOUT_SECONDS) and was stopped',
  killed: 'the command was ended by a signal',
  agent_lost: 'the agent was removed from the registry before the command reported a result',
  server_restarted: 'sandboxd restarted while the mission was assigned or running (nothing follows it after a restart)',
} as const;
export type MissionFailureReason = keyof typeof MISSION_FAILURE_REASONS;

export function isTerminal(status: MissionStatus): boolean {
  return status === 'completed' || status === 'failed';
}

/** Moves a mission from `current` when it is one of `from`; returns whether it moved. */
export function moveMission(
  id: string,
  current: MissionStatus,
  from: readonly MissionStatus[],
  to: MissionStatus,
  cause: string,
  logger?: TransitionLogger,
): boolean {
  const m = new StateMachine<MissionStatus>({
    name: 'mission',
    initial: current,
    table: MISSION_TABLE,
    ...(logger !== undefined && { logger }),
    logFields: { mission: id },
  });
  return m.transition(from, to, cause);
}

/** README's mission state table. */
export function missionTableMarkdown(): string {
  return transitionTableMarkdown(MISSION_TABLE, {
    assigned: {
      running: 'first output or result from the command, or the start window passed',
      failed: 'the command could not start, or the dispatcher failed (the dispatch answered 500)',
    },
    running: {
      completed: 'the command exited 0',
      failed: 'non-zero exit, timeout, signal, agent removed, or a server restart',
    },
  });
}
