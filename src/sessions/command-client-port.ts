/**
 * SessionAgentPort over the agents server: PTY and one-shot commands through AgentCommandClient
 * (the one facade that starts commands on agents), stdin and resize as direct control calls to
 * the agent's actor.
 *
 * Why stdin/resize do not use the client's RunningCommand handle: after a server restart a
 * session's PTY command (started by the previous server process) is still running on the agent
 * and resumes its output on the new stream; this process never started it, so there is no handle,
 * but the agent actor forwards StdinChunk / PtyControl for any command id.
 *
 * Output and results of PTY commands are NOT routed here: wiring.ts feeds every command's output
 * (subscribeCommands) to SessionService.commandOutput, which covers adopted commands too.
 */
import { agentActorId } from '../../actors/protocol/agent-frames.js';
import type { AgentCommandClient, CommandCallPort } from '../agent-link/command-client.js';
import { SvcError } from '../core/errors.js';
import type { OneShotCommandRequest, OneShotResult, PtyCommandRequest, SessionAgentPort } from './agent-port.js';
import type { SessionLogger } from './session-service.js';
import { errorMessage } from '../util/error-message.js';

/** One-shot output kept at most (bytes); the rest is dropped. */
export const kOneShotOutputBytes = 64 * 1024;
/** Added to a one-shot command's timeout_seconds before the server gives up (ms). */
export const kOneShotSlackMs = 10_000;

export interface CommandClientPortOptions {
  readonly client: Pick<AgentCommandClient, 'start'>;
  readonly actors: CommandCallPort;
  /** True while the agent's stream is open (registry status Starting … Stale). */
  readonly connected: (agentId: string) => boolean;
  readonly logger?: SessionLogger;
}

interface Pending {
  readonly agentId: string;
  readonly fail: (err: SvcError) => void;
}

export class CommandClientPort implements SessionAgentPort {
  readonly #o: CommandClientPortOptions;
  /** One-shot commands waiting for a result, by command id. */
  readonly #pending = new Map<string, Pending>();

  constructor(opts: CommandClientPortOptions) {
    this.#o = opts;
  }

  async startPty(agentId: string, req: PtyCommandRequest): Promise<void> {
    const [command, ...args] = req.argv;
    if (command === undefined) throw new SvcError('request.invalid', 'empty argv');
    if (!this.#o.connected(agentId)) throw new SvcError('server.unavailable', `agent ${agentId} is not connected`);
    try {
      const running = await this.#o.client.start(agentId, {
        commandId: req.commandId,
        command,
        args,
        allocatePty: true,
        ptyCols: req.cols,
        ptyRows: req.rows,
        ptyTerm: req.term,
        sessionId: req.sessionId,
        sessionName: req.sessionName,
        timeoutSeconds: req.timeoutSeconds,
        ...(req.workingDir !== undefined && { workingDir: req.workingDir }),
        ...(req.env !== undefined && { env: { ...req.env } }),
      });
      // Output and the result reach SessionService through subscribeCommands; the client's own
      // route would only hold the result promise, so drop it now.
      running.detach();
    } catch (err) {
      throw unavailable(agentId, err);
    }
  }

  writeStdin(agentId: string, commandId: string, data: Uint8Array): boolean {
    return this.#control(agentId, 'sendStdin', { commandId, data, eof: false });
  }

  resizePty(agentId: string, commandId: string, cols: number, rows: number): boolean {
    return this.#control(agentId, 'resizePty', { commandId, cols, rows });
  }

  async runCommand(agentId: string, req: OneShotCommandRequest): Promise<OneShotResult> {
    const [command, ...args] = req.argv;
    if (command === undefined) throw new SvcError('request.invalid', 'empty argv');
    if (!this.#o.connected(agentId)) throw new SvcError('server.unavailable', `agent ${agentId} is not connected`);
    const chunks: Buffer[] = [];
    let kept = 0;
    const collect = (data: Buffer): void => {
      if (kept >= kOneShotOutputBytes) return;
      const part = data.subarray(0, kOneShotOutputBytes - kept);
      chunks.push(part);
      kept += part.byteLength;
    };
    let running;
    try {
      running = await this.#o.client.start(
        agentId,
        { commandId: req.commandId, command, args, timeoutSeconds: req.timeoutSeconds },
        { output: (_stream, data) => collect(data) },
      );
    } catch (err) {
      throw unavailable(agentId, err);
    }
    const limitMs = req.timeoutSeconds * 1000 + kOneShotSlackMs;
    let timer: NodeJS.Timeout | undefined;
    const interrupted = new Promise<never>((_resolve, reject) => {
      this.#pending.set(req.commandId, { agentId, fail: reject });
      timer = setTimeout(
        () => reject(new SvcError('server.timeout', `no result for ${command} on agent ${agentId} within ${limitMs} ms`)),
        limitMs,
      );
      timer.unref();
    });
    try {
      const r = await Promise.race([running.result, interrupted]);
      return { exitCode: r.exit_code, output: Buffer.concat(chunks).toString('utf8') };
    } finally {
      clearTimeout(timer);
      this.#pending.delete(req.commandId);
      running.detach();
    }
  }

  /** The agent's stream ended: its one-shot commands fail now instead of at their timeout. */
  agentDisconnected(agentId: string): void {
    for (const p of [...this.#pending.values()]) {
      if (p.agentId === agentId) p.fail(new SvcError('server.unavailable', `agent ${agentId} disconnected before the command finished`));
    }
  }

  #control(agentId: string, method: 'sendStdin' | 'resizePty', args: Record<string, unknown>): boolean {
    if (!this.#o.connected(agentId)) return false;
    this.#o.actors.call(agentActorId(agentId), method, args).catch((err: unknown) => {
      this.#o.logger?.warn({ agent: agentId, method, err: errorMessage(err) }, 'session control call failed');
    });
    return true;
  }
}

/** The client's agent.not_found (no actor) means "not connected" to the sessions component. */
function unavailable(agentId: string, err: unknown): unknown {
  if (err instanceof SvcError && (err.code === 'agent.not_found' || err.code === 'actor.not_found')) {
    return new SvcError('server.unavailable', `agent ${agentId} is not connected`);
  }
  return err;
}
