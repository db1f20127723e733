/**
 * Message dispatch: an A2A message sent to an instance becomes a task whose command runs on the
 * instance's agent through the one command facade (AgentCommandClient, via runAgentCommand), its
 * output recorded as the task's artifacts and its end as the task's terminal state.
 *
 * How a message maps to a command (our decision; README "A2A"): the text of the message (its text
 * parts joined with a newline) is a shell command line, run as `/bin/sh -c <text>` in the agent's
 * work directory with A2A_TASK_ID and A2A_CONTEXT_ID set, and a deadline of `timeoutSeconds` the
 * agent enforces itself. Exit 0 → completed; any other exit, a start failure or a lost agent →
 * failed; CancelTask → canceled at once, and the command's process group gets SIGTERM, then SIGKILL
 * after the grace (kill means kill; the exit code is recorded when the result comes).
 *
 * The reference prints the message instead (`printf '%s\n' "$AIWG_A2A_MESSAGE"`); running it is
 * what makes the task's artifacts worth fetching.
 */
import type { CommandStarter } from '../tasks/agent-run.js';
import { runAgentCommand } from '../tasks/agent-run.js';
import { SvcError } from '../core/errors.js';
import { errorMessage } from '../util/error-message.js';
import type { A2aTaskStore, TaskSnapshot } from './task-store.js';
import { isTerminal, type ParsedMessage } from './wire.js';

/** The slice of the agents registry dispatch needs. */
export interface InstanceAgents {
  /** The agent behind an instance id, and whether its stream is open. */
  byInstance(instanceId: string): { agentId: string; connected: boolean } | undefined;
}

export interface DispatcherOptions {
  readonly store: A2aTaskStore;
  readonly commands: CommandStarter;
  readonly agents: InstanceAgents;
  /** The agent's deadline for one message's command, seconds. */
  readonly timeoutSeconds: number;
  /** SIGTERM → SIGKILL grace on cancel (ms); default runAgentCommand's. */
  readonly killGraceMs?: number;
  readonly logger?: { warn(obj: object, msg?: string): void };
}

export class A2aDispatcher {
  readonly #o: DispatcherOptions;
  /** Running commands' abort controllers, by task id. */
  readonly #running = new Map<string, AbortController>();
  /** Tasks this dispatcher made and has not finished (prepared, or running). */
  readonly #mine = new Set<string>();

  constructor(o: DispatcherOptions) {
    this.#o = o;
  }

  /**
   * Records the message's task (submitted) without starting it, so a caller can answer and
   * subscribe before the first state change. Throws a2a.agent_unavailable (no connected agent
   * behind the instance), request.invalid (a taskId that sandboxd did not make; a task takes one
   * message), a2a.store_full.
   */
  prepare(instanceId: string, m: ParsedMessage): TaskSnapshot {
    const agent = this.#o.agents.byInstance(instanceId);
    if (agent === undefined || !agent.connected) {
      throw new SvcError('a2a.agent_unavailable', `no connected agent behind instance ${JSON.stringify(instanceId.slice(0, 128))}`);
    }
    if (m.taskId !== undefined) {
      throw new SvcError('request.invalid', 'a task takes one message: send a new message without taskId (contextId groups tasks)');
    }
    const task = this.#o.store.create({
      instanceId,
      text: m.text,
      messageId: m.messageId,
      contextId: m.contextId,
      commandId: `a2a-${crypto.randomUUID()}`,
    });
    this.#mine.add(task.id);
    return task;
  }

  /**
   * Starts a prepared task's command; resolves once it is working (or failed to start). The
   * task's end is recorded in the background.
   */
  async start(task: TaskSnapshot): Promise<TaskSnapshot> {
    const { store } = this.#o;
    // Canceled between prepare and start: nothing to run.
    if (isTerminal(this.#now(task).state)) {
      this.#mine.delete(task.id);
      return this.#now(task);
    }
    const agent = this.#o.agents.byInstance(task.instanceId);
    if (agent === undefined || !agent.connected) {
      this.#mine.delete(task.id);
      store.transition(task.id, 'failed', 'agent_unavailable', { reason: 'the agent is not connected' });
      return this.#now(task);
    }
    const abort = new AbortController();
    this.#running.set(task.id, abort);
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const done = runAgentCommand(this.#o.commands, {
      agentId: agent.agentId,
      commandId: task.commandId,
      argv: ['/bin/sh', '-c', task.text],
      cwd: '',
      env: { A2A_TASK_ID: task.id, A2A_CONTEXT_ID: task.contextId },
      timeoutSeconds: this.#o.timeoutSeconds,
      signal: abort.signal,
      ...(this.#o.killGraceMs !== undefined && { killGraceMs: this.#o.killGraceMs }),
      onOutput: (stream, data) => store.appendOutput(task.id, stream, data),
      onGap: (gap) =>
        this.#o.logger?.warn({ task: task.id, lost_bytes: gap.lost_bytes, reason: gap.reason }, 'a2a task output lost by the agent'),
      onStarted: () => {
        store.transition(task.id, 'working', 'command_started');
        started();
      },
    }).then(
      (outcome) => {
        store.finishOutput(task.id);
        if (outcome.exitCode === 0 && outcome.error === '') store.transition(task.id, 'completed', 'exited', { exitCode: 0 });
        else {
          const why = outcome.error !== '' ? outcome.error : `exit code ${outcome.exitCode}`;
          store.transition(task.id, 'failed', 'exited', { exitCode: outcome.exitCode, reason: why });
        }
      },
      (err: unknown) => {
        store.transition(task.id, 'failed', 'start_failed', { reason: `the command could not start: ${errorMessage(err)}` });
      },
    );
    void done.finally(() => {
      this.#running.delete(task.id);
      this.#mine.delete(task.id);
      started();
    });
    await running;
    return this.#now(task);
  }

  /**
   * CancelTask: the task is canceled now and its command killed. Throws a2a.task_not_found,
   * a2a.task_not_cancelable (already terminal, or not started over A2A).
   */
  cancel(instanceId: string, taskId: string): TaskSnapshot {
    const { store } = this.#o;
    const t = store.get(instanceId, taskId);
    if (t === undefined)
      throw new SvcError('a2a.task_not_found', `no task ${JSON.stringify(taskId.slice(0, 128))} on instance ${instanceId}`);
    if (isTerminal(t.state)) throw new SvcError('a2a.task_not_cancelable', `task ${taskId} is ${t.state}`);
    // A task another feature records (a dispatched mission) runs a command this dispatcher does
    // not hold: marking it canceled would leave the command running.
    if (!this.#mine.has(taskId))
      throw new SvcError(
        'a2a.task_not_cancelable',
        `task ${taskId} was not started over A2A (a dispatched mission); it cannot be canceled here`,
      );
    store.transition(taskId, 'canceled', 'cancel_requested', { reason: 'canceled by CancelTask' });
    this.#running.get(taskId)?.abort();
    return this.#now(t);
  }

  /** Kills every running command (server stopping). */
  stop(): void {
    for (const a of this.#running.values()) a.abort();
  }

  #now(t: TaskSnapshot): TaskSnapshot {
    return this.#o.store.get(t.instanceId, t.id) ?? t;
  }
}
