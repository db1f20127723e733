/**
 * Running a task's coding agent on the task VM's agent (the ready → running part of a task),
 * through the AgentCommandClient: the command goes through the agent's actor like every other
 * command, so its output also lands in the replay ring, the agent-output SSE stream and the chat
 * projection (command id `task-<uuid>`; the chat session is the command id).
 *
 * Kill means kill: when the task's signal aborts (DELETE, lifecycle.timeout, agent lost, server
 * stopping) the command's process group gets SIGTERM, then SIGKILL after `killGraceMs` if no
 * result came; the outcome is the agent's result (128 + signal) or, when the agent never answers
 * within another {@link RESULT_AFTER_KILL_MS}, a synthetic one saying so.
 *
 * As a backstop against a server that loses the agent, the agent itself gets `timeout_seconds`
 * (the task's remaining lifecycle.timeout plus {@link AGENT_BACKSTOP_SLACK_SECONDS}): it kills
 * the group on its own even if no signal ever reaches it.
 */
import type { CommandGapFrame, CommandResultFrame } from '../../actors/protocol/agent-frames.js';
import type { CommandHandlers, RunningCommand, StartArgs } from '../agent-link/command-client.js';

/** How the orchestrator starts commands (AgentCommandClient has it). */
export interface CommandStarter {
  start(agentId: string, args: StartArgs, handlers?: CommandHandlers): Promise<RunningCommand>;
}

/** How long a result may take after SIGKILL before the run is given up as lost (ms). */
export const RESULT_AFTER_KILL_MS = 10_000;
/** Added to the agent's own timeout so the server's lifecycle timer fires first (s). */
export const AGENT_BACKSTOP_SLACK_SECONDS = 30;
/** Default SIGTERM → SIGKILL grace (ms). */
export const DEFAULT_KILL_GRACE_MS = 5_000;

export interface AgentRunOptions {
  readonly agentId: string;
  /** Command id: the task id, so logs, replay and chat name the task. */
  readonly commandId: string;
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  /** The agent's own deadline (0: none). */
  readonly timeoutSeconds: number;
  /** The task's signal: aborting it kills the process group. */
  readonly signal: AbortSignal;
  /** Default {@link DEFAULT_KILL_GRACE_MS}. */
  readonly killGraceMs?: number;
  readonly onOutput: (stream: 'stdout' | 'stderr', data: Buffer) => void;
  readonly onGap: (gap: CommandGapFrame) => void;
  /** Called once the agent accepted the command. */
  readonly onStarted?: (commandId: string) => void;
}

export interface AgentRunOutcome {
  readonly exitCode: number;
  /** The agent's error text ('' for a normal exit). */
  readonly error: string;
  /** `timeout_seconds` when the agent's backstop ended it. */
  readonly timedOutBy: string;
  /** True when the signal aborted the run and the group was signalled. */
  readonly killed: boolean;
  /** False when no result came even after SIGKILL (the agent is gone). */
  readonly resultReceived: boolean;
}

/**
 * Starts the command and resolves with its outcome. Rejects only when the agent refused to start
 * it (agent.not_found, server.unavailable, request.invalid).
 */
export async function runAgentCommand(commands: CommandStarter, o: AgentRunOptions): Promise<AgentRunOutcome> {
  const [program, ...args] = o.argv;
  if (program === undefined) throw new Error('empty argv');
  const cmd = await commands.start(
    o.agentId,
    { commandId: o.commandId, command: program, args, workingDir: o.cwd, env: { ...o.env }, timeoutSeconds: o.timeoutSeconds },
    {
      // The agent's own `log` stream (its notes about the command, e.g. a timeout) is shown as stderr.
      output: (stream, data) => o.onOutput(stream === 'stdout' ? 'stdout' : 'stderr', data),
      gap: (gap) => o.onGap(gap),
    },
  );
  o.onStarted?.(cmd.commandId);
  const graceMs = o.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  let killed = false;
  let killing: Promise<CommandResultFrame | null> | null = null;
  const kill = (): Promise<CommandResultFrame | null> => {
    killed = true;
    killing ??= (async () => {
      await cmd.signal(15).catch(() => undefined);
      const soft = await within(cmd.result, graceMs);
      if (soft !== null) return soft;
      await cmd.signal(9).catch(() => undefined);
      return within(cmd.result, RESULT_AFTER_KILL_MS);
    })();
    return killing;
  };
  const aborted = new Promise<'aborted'>((resolve) => {
    if (o.signal.aborted) resolve('aborted');
    else o.signal.addEventListener('abort', () => resolve('aborted'), { once: true });
  });
  const first = await Promise.race([cmd.result, aborted]);
  const result: CommandResultFrame | null = first === 'aborted' ? await kill() : first;
  if (result === null) {
    cmd.detach();
    return {
      exitCode: -1,
      error: `the agent sent no result within ${Math.round((graceMs + RESULT_AFTER_KILL_MS) / 1000)} s of SIGTERM/SIGKILL`,
      timedOutBy: '',
      killed,
      resultReceived: false,
    };
  }
  return { exitCode: result.exit_code, error: result.error, timedOutBy: result.timed_out_by, killed, resultReceived: true };
}

/** p's value, or null when it does not settle within ms (the timer is unref'd). */
export function within<T>(p: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
    timer.unref();
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
