/**
 * AgentService.Exec: an operator's one-shot command on a named agent (spec 4.17).
 *
 * - Operator certificate required (identity.operator_required, PERMISSION_DENIED; no verified
 *   identity: agent.unauthenticated). An agent certificate is refused.
 * - Unknown agent: NOT_FOUND (agent.not_found). A listed but disconnected agent: UNAVAILABLE.
 * - timeout_seconds 0 means SVC_EXEC_DEFAULT_TIMEOUT_SECONDS. The agent enforces it (SIGTERM to
 *   the process group, SIGKILL after its grace) and reports the result; if no result arrives
 *   within timeout + graceMs (agent silent or gone for good) the call ends DEADLINE_EXCEEDED and
 *   the command is expired in the actor (a late result is then a duplicate).
 * - The stream: ExecOutput {stream 1 stdout / 2 stderr, data} per chunk, in order, each chunk
 *   once (resends after an agent reconnect are dropped by seq); an item with only `error` set
 *   when output was lost; a final {complete: true, exit_code, error}. The agent's `log` stream is
 *   not part of Exec.
 * - The client cancelling the call kills the command (SIGKILL to its process group).
 */
import { randomUUID } from 'node:crypto';
import type * as grpc from '@grpc/grpc-js';
import { v1 } from '../../proto/index.js';
import {
  agentActorId,
  decodeJson,
  OutputStream,
  type CommandGapFrame,
  type CommandResultFrame,
  type OutputFrame,
} from '../../actors/protocol/agent-frames.js';
import { ERROR_TABLE, GrpcStatus, SvcError, toWire } from '../core/errors.js';
import { checkOperatorIdentity, identityFromPeerCertificate } from '../identity/spiffe.js';
import type { ActorPort } from '../../actors/runtime/actor-lane.js';
import type { AgentMetrics } from './agent-metrics.js';
import type { AgentRegistry } from './agent-registry.js';
import { endWithStatus, type LoggerLike } from './grpc-util.js';

/** Extra time after timeout_seconds before the server gives up on a result (ms). Default 15 s. */
export const kDefaultExecGraceMs = 15_000;

export type ExecCall = grpc.ServerWritableStream<v1.ExecRequest, v1.IExecOutput>;

interface ExecState {
  readonly agentId: string;
  readonly call: ExecCall;
  readonly timer: NodeJS.Timeout;
  done: boolean;
}

export interface ExecCallsOptions {
  readonly trustDomain: string;
  readonly logger: LoggerLike;
  readonly metrics: AgentMetrics;
  readonly registry: AgentRegistry;
  readonly actors: () => ActorPort | undefined;
  readonly defaultTimeoutSeconds: number;
  readonly graceMs?: number;
}

export class ExecCalls {
  readonly #opts: ExecCallsOptions;
  readonly #execs = new Map<string, ExecState>();

  constructor(opts: ExecCallsOptions) {
    this.#opts = opts;
  }

  /** Exec calls in flight. */
  get size(): number {
    return this.#execs.size;
  }

  /** The grpc-js handler of Exec. */
  handleExec(call: ExecCall): void {
    call.on('error', () => undefined);
    const identity = identityFromPeerCertificate(call.getAuthContext()?.sslPeerCertificate, this.#opts.trustDomain);
    const who = checkOperatorIdentity(identity);
    if (!who.ok) {
      const code = who.code === 'agent.identity_mismatch' ? 'identity.operator_required' : who.code;
      return this.#refuse(call, code, who.code === 'agent.identity_mismatch' ? `Exec is an operator call: ${who.message}` : who.message);
    }
    const req = call.request;
    const agentId = req.agentId ?? '';
    const agent = this.#opts.registry.get(agentId);
    if (agent === undefined) return this.#refuse(call, 'agent.not_found', `no agent ${JSON.stringify(agentId.slice(0, 128))}`);
    if (agent.status === 'Disconnected') return this.#refuse(call, 'server.unavailable', `agent ${agentId} is disconnected`);
    if ((req.command ?? '') === '') return this.#refuse(call, 'request.invalid', 'command is required');
    const actors = this.#opts.actors();
    if (actors === undefined) return this.#refuse(call, 'server.not_ready', 'the server is starting or stopping');
    const timeoutSeconds = (req.timeoutSeconds ?? 0) > 0 ? req.timeoutSeconds : this.#opts.defaultTimeoutSeconds;
    const commandId = `exec-${randomUUID()}`;
    const deadlineMs = timeoutSeconds * 1000 + (this.#opts.graceMs ?? kDefaultExecGraceMs);
    const timer = setTimeout(() => this.#expire(commandId, timeoutSeconds), deadlineMs);
    timer.unref();
    const state: ExecState = { agentId, call, timer, done: false };
    // Registered before dispatch: output can arrive before the dispatch call returns.
    this.#execs.set(commandId, state);
    call.on('cancelled', () => {
      if (!this.#finish(commandId)) return;
      this.#opts.logger.info({ agent: agentId, commandId, operator: who.name }, 'exec cancelled by the client; killing the command');
      actors.call(agentActorId(agentId), 'signalCommand', { commandId, signal: 9 }).catch(() => undefined);
    });
    this.#opts.logger.info({ agent: agentId, commandId, operator: who.name, timeoutSeconds }, 'exec');
    actors
      .call(agentActorId(agentId), 'runCommand', {
        commandId,
        command: req.command,
        args: req.args ?? [],
        workingDir: req.workingDir ?? '',
        env: { ...(req.env ?? {}) },
        timeoutSeconds,
        source: 'exec',
      })
      .catch((err: unknown) => {
        if (!this.#finish(commandId)) return;
        const wire = toWire(err);
        const code = wire.code === 'actor.not_found' ? 'server.unavailable' : wire.code;
        endWithStatus(call, ERROR_TABLE[code].grpc, wire.message);
      });
  }

  /** A chunk of `commandId` (the decoded kFrameCommandOutput; its data is a view into the ring). */
  onOutput(commandId: string, frame: OutputFrame): void {
    const state = this.#execs.get(commandId);
    if (state === undefined) return;
    if (frame.stream === OutputStream.log) return;
    if (frame.data.byteLength === 0) return;
    const stream = frame.stream === OutputStream.stderr ? v1.ExecOutput.Stream.STREAM_STDERR : v1.ExecOutput.Stream.STREAM_STDOUT;
    // The data points into the ring; grpc-js serializes later, so copy.
    state.call.write({ stream, data: Buffer.from(frame.data) });
  }

  onGap(commandId: string, payload: Uint8Array): void {
    const state = this.#execs.get(commandId);
    if (state === undefined) return;
    const gap = decodeJson<CommandGapFrame>(payload);
    state.call.write({
      error: `output lost: chunks ${gap.first_seq}-${gap.last_seq}${gap.lost_bytes > 0 ? `, ${gap.lost_bytes} bytes` : ''} (${gap.reason})`,
    });
  }

  onResult(commandId: string, payload: Uint8Array): void {
    const state = this.#execs.get(commandId);
    if (state === undefined || !this.#finish(commandId)) return;
    const r = decodeJson<CommandResultFrame>(payload);
    const error = r.error !== '' ? r.error : r.timed_out_by !== '' ? `timed out (${r.timed_out_by})` : '';
    state.call.write({ exitCode: r.exit_code, complete: true, error });
    state.call.end();
  }

  /** The agents' actors are gone (shard restart): their Exec calls end UNAVAILABLE. */
  failAgents(agentIds: ReadonlySet<string>, reason: string): void {
    for (const [commandId, state] of this.#execs) {
      if (!agentIds.has(state.agentId) || !this.#finish(commandId)) continue;
      endWithStatus(state.call, GrpcStatus.UNAVAILABLE, reason);
    }
  }

  /** Ends every call (server stopping). */
  closeAll(reason: string): void {
    for (const [commandId, state] of this.#execs) {
      if (this.#finish(commandId)) endWithStatus(state.call, GrpcStatus.UNAVAILABLE, reason);
    }
  }

  #expire(commandId: string, timeoutSeconds: number): void {
    const state = this.#execs.get(commandId);
    if (state === undefined || !this.#finish(commandId)) return;
    const reason = `no result from agent ${state.agentId} within ${timeoutSeconds} s + grace`;
    this.#opts.logger.warn({ agent: state.agentId, commandId }, reason);
    this.#opts
      .actors()
      ?.call(agentActorId(state.agentId), 'expireCommand', { commandId, reason })
      .catch(() => undefined);
    endWithStatus(state.call, GrpcStatus.DEADLINE_EXCEEDED, reason);
  }

  /** Marks the exec done once; false when it already was. */
  #finish(commandId: string): boolean {
    const state = this.#execs.get(commandId);
    if (state === undefined || state.done) return false;
    state.done = true;
    clearTimeout(state.timer);
    this.#execs.delete(commandId);
    return true;
  }

  #refuse(call: ExecCall, code: keyof typeof ERROR_TABLE, message: string): void {
    this.#opts.logger.warn({ code, reason: message, peer: call.getPeer() }, 'exec refused');
    this.#opts.metrics.refused(code);
    endWithStatus(call, new SvcError(code, message).grpcStatus, message);
  }
}
