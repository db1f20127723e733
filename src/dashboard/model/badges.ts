/**
 * How lifecycle states look: a tone (the badge colour family) and a label for every agent status,
 * VM state, operation status and task state of the spec (part 3), plus which VM actions make
 * sense in which state. Unknown values (a newer server) get the neutral tone and their raw text.
 */

/** Colour families of the stylesheet (`.badge.tone-*`). */
export type Tone = 'ok' | 'busy' | 'progress' | 'warn' | 'bad' | 'idle';

export interface Badge {
  readonly tone: Tone;
  readonly label: string;
}

const AGENT: Readonly<Record<string, Badge>> = {
  Starting: { tone: 'progress', label: 'Starting' },
  Ready: { tone: 'ok', label: 'Ready' },
  Busy: { tone: 'busy', label: 'Busy' },
  Error: { tone: 'bad', label: 'Error' },
  ShuttingDown: { tone: 'progress', label: 'Shutting down' },
  Stale: { tone: 'warn', label: 'Stale' },
  Disconnected: { tone: 'idle', label: 'Disconnected' },
};

const VM: Readonly<Record<string, Badge>> = {
  running: { tone: 'ok', label: 'running' },
  stopped: { tone: 'idle', label: 'stopped' },
  shutdown: { tone: 'idle', label: 'shut down' },
  paused: { tone: 'warn', label: 'paused' },
  suspended: { tone: 'warn', label: 'suspended' },
  crashed: { tone: 'bad', label: 'crashed' },
  unknown: { tone: 'idle', label: 'unknown' },
};

const OPERATION: Readonly<Record<string, Badge>> = {
  pending: { tone: 'progress', label: 'pending' },
  running: { tone: 'progress', label: 'running' },
  completed: { tone: 'ok', label: 'completed' },
  failed: { tone: 'bad', label: 'failed' },
};

const TASK: Readonly<Record<string, Badge>> = {
  pending: { tone: 'progress', label: 'pending' },
  staging: { tone: 'progress', label: 'staging' },
  provisioning: { tone: 'progress', label: 'provisioning' },
  ready: { tone: 'progress', label: 'ready' },
  running: { tone: 'busy', label: 'running' },
  completing: { tone: 'busy', label: 'completing' },
  completed: { tone: 'ok', label: 'completed' },
  failed: { tone: 'bad', label: 'failed' },
  failed_preserved: { tone: 'bad', label: 'failed (preserved)' },
  cancelled: { tone: 'idle', label: 'cancelled' },
};

function lookup(table: Readonly<Record<string, Badge>>, value: string): Badge {
  return Object.hasOwn(table, value) ? (table[value] as Badge) : { tone: 'idle', label: value === '' ? 'unknown' : value };
}

export const agentBadge = (status: string): Badge => lookup(AGENT, status);
export const vmBadge = (state: string): Badge => lookup(VM, state);
export const operationBadge = (status: string): Badge => lookup(OPERATION, status);
export const taskBadge = (state: string): Badge => lookup(TASK, state);

/** Task states in lifecycle order (spec part 3), for the list filter. */
export const TASK_STATES = Object.keys(TASK);
/** Agent statuses in the order the fleet summary shows them. */
export const AGENT_STATUSES = Object.keys(AGENT);

/** Task states that will not change any more (cancel is refused, logs end). */
export function isTaskFinished(state: string): boolean {
  return state === 'completed' || state === 'failed' || state === 'failed_preserved' || state === 'cancelled';
}

/** Operation statuses that end polling. */
export function isOperationFinished(status: string): boolean {
  return status === 'completed' || status === 'failed';
}

/** A VM row's buttons. */
export type VmAction = 'start' | 'stop' | 'restart' | 'delete';

/**
 * Which actions a VM in `state` offers (spec part 3, VM table): start unless running; stop and
 * restart only while running; delete always (a running VM needs the force option, which the
 * confirmation dialog offers pre-ticked).
 */
export function vmActions(state: string): readonly VmAction[] {
  if (state === 'running') return ['stop', 'restart', 'delete'];
  if (state === 'paused' || state === 'suspended') return ['start', 'stop', 'delete'];
  return ['start', 'delete'];
}

/** True when deleting a VM in this state needs force=true (the server answers 409 VM_RUNNING otherwise). */
export function deleteNeedsForce(state: string): boolean {
  return state === 'running' || state === 'paused' || state === 'suspended';
}
