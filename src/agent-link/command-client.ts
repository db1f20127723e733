/**
 * Running commands on agents from the main thread: the one facade tasks, sessions and HITL use.
 *
 * A command is started with a control call to the agent's actor (`runCommand`); its output,
 * gaps and result come back through AgentService.subscribeCommands, and this class routes them
 * to the one handle that asked, so callers never see other commands' traffic.
 */
import { randomUUID } from 'node:crypto';
import { agentActorId, type CommandGapFrame, type CommandResultFrame } from '../../actors/protocol/agent-frames.js';
import type { RunCommandArgs } from '../../actors/protocol/agent-frames.js';
import { SvcError } from '../core/errors.js';
import type { AgentService, CommandEvent } from './agent-service.js';

/** The slice of ActorSystem this needs (tests pass a fake or the real system). */
export interface CommandCallPort {
  call<T = unknown>(id: string, method: string, args?: unknown, opts?: { timeoutMs?: number }): Promise<T>;
}

export type OutputStreamName = 'stdout' | 'stderr' | 'log';

export interface CommandHandlers {
  /** One chunk in order; `data` is a copy the handler may keep. */
  output?(stream: OutputStreamName, data: Buffer, seq: number): void;
  gap?(gap: CommandGapFrame): void;
}

export interface RunningCommand {
  readonly agentId: string;
  readonly commandId: string;
  /** Resolves with the command's result (exit code, 128+signal, -1 when it could not start). */
  readonly result: Promise<CommandResultFrame>;
  /** Sends a POSIX signal to the command's process group. */
  signal(signalNumber: number): Promise<void>;
  stdin(data: Uint8Array, eof?: boolean): Promise<void>;
  resize(cols: number, rows: number): Promise<void>;
  /** Stops routing this command's events (its result promise stays pending if not settled). */
  detach(): void;
}

export type StartArgs = Omit<RunCommandArgs, 'commandId' | 'source'> & { commandId?: string };

interface Route {
  handlers: CommandHandlers;
  resolve: (r: CommandResultFrame) => void;
}

export class AgentCommandClient {
  readonly #actors: CommandCallPort;
  readonly #routes = new Map<string, Route>();
  readonly #unsubscribe: () => void;

  constructor(actors: CommandCallPort, agents: Pick<AgentService, 'subscribeCommands'>) {
    this.#actors = actors;
    this.#unsubscribe = agents.subscribeCommands((e) => this.#route(e));
  }

  /**
   * Starts `args` on agent `agentId`. Rejects with the actor's error (agent.not_found when the
   * agent has no actor, request.invalid for bad arguments).
   */
  async start(agentId: string, args: StartArgs, handlers: CommandHandlers = {}): Promise<RunningCommand> {
    const commandId = args.commandId ?? `cmd-${randomUUID()}`;
    let resolve!: (r: CommandResultFrame) => void;
    const result = new Promise<CommandResultFrame>((r) => (resolve = r));
    // Route before the call: output may arrive before the call's answer does.
    this.#routes.set(commandId, { handlers, resolve });
    const actorId = agentActorId(agentId);
    try {
      await this.#actors.call(actorId, 'runCommand', { ...args, commandId, source: 'server' });
    } catch (err) {
      this.#routes.delete(commandId);
      throw err instanceof SvcError && err.code === 'actor.not_found'
        ? new SvcError('agent.not_found', `agent ${agentId} is not connected`)
        : err;
    }
    const call = (method: string, extra: Record<string, unknown>): Promise<void> =>
      this.#actors.call(actorId, method, { commandId, ...extra }).then(() => undefined);
    return {
      agentId,
      commandId,
      result,
      signal: (signalNumber) => call('signalCommand', { signal: signalNumber }),
      stdin: (data, eof = false) => call('sendStdin', { data, eof }),
      resize: (cols, rows) => call('resizePty', { cols, rows }),
      detach: () => {
        this.#routes.delete(commandId);
      },
    };
  }

  stop(): void {
    this.#unsubscribe();
    this.#routes.clear();
  }

  #route(e: CommandEvent): void {
    const route = this.#routes.get(e.kind === 'output' ? e.commandId : e.command_id);
    if (route === undefined) return;
    switch (e.kind) {
      case 'output':
        route.handlers.output?.(e.stream, Buffer.from(e.data), e.seq);
        return;
      case 'gap':
        route.handlers.gap?.(e);
        return;
      case 'result':
        this.#routes.delete(e.command_id);
        route.resolve(e);
        return;
    }
  }
}
